// One lane of an offload engine: the context its holder posts on, the queue requesters fill,
// the lock whoever carries the lane out holds, and the in-flight lists the holder completes.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <seriema/fabric/attached_thread.hpp>
#include <seriema/invoke/future.hpp>
#include <seriema/offload/detail/command_queue.hpp>
#include <seriema/offload/engine.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <seriema/transfer/transmitter.hpp>
#include <pthread.h>
#include <string>
#include <thread>
#include <time.h>
#include <vector>

namespace seriema::offload {

// The engine's shared state (src/offload/engine.cpp).
struct engine::state {
  state(engine& owner, const engine_options& options);
  engine& owner;
  engine_options options;
  const std::uint64_t id;  // never reused by another engine of the process (lane caches)
  std::vector<std::unique_ptr<detail::lane>> lanes;
  // Regions: entries [0, region_count) are written once under regions_mutex before
  // region_count is raised (release); lanes read them after loading the count (acquire).
  static constexpr std::size_t max_regions = 1024;
  std::unique_ptr<transfer::remote_memory_locator[]> regions;
  std::atomic<std::uint32_t> region_count{0};
  std::mutex regions_mutex;
  std::atomic<bool> stopping{false};
  struct atomic_counters {
    std::atomic<std::uint64_t> requests{0}, refused_full{0}, batches{0}, posted{0},
        completions_asked{0}, sleeps{0}, wakes{0}, delegated{0}, executor_errors{0},
        endpoints{0}, coalesced{0}, gathered{0}, bundles{0}, bundled{0}, one_sided{0};
  } counters;
  // The first executor error is logged; later ones are counted.
  void report_executor_error(const char* where, std::exception_ptr error) noexcept;
};

namespace detail {

enum class transfer_kind : std::uint32_t { put, get, fetch_add, compare_swap, swap };

// Who touches what: everything below `lock_` is used only by the thread holding the lane's
// lock (the executor thread; a direct requester while it posts; a delegating requester), so it
// needs no synchronization beyond the lock (acquire on taking it, release on leaving it).
// `in_flight` is also read without the lock by the executor's decision to sleep and by direct
// requesters deciding to wake it (seq_cst on both sides, see executor_loop).
class lane {
 public:
  lane(engine::state& st, std::uint16_t index);
  ~lane();

  void start_executor();                 // spin, sleep, direct: the executor thread
  void attach_here();                    // delegate: the constructing thread holds the slot
  void wait_started(fabric::deadline_clock::time_point deadline);  // throws its error
  void wake_to_stop() noexcept;          // executor: wakes it to see `stopping`
  void stop() noexcept;                  // executor: wakes and joins; delegate: shuts down

  // The look before the exchange is seq_cst too: delegation's "claim, then try the lock"
  // must not let the look pass the claim (see drive()).
  [[nodiscard]] bool try_lock() noexcept {
    return !locked_.load(std::memory_order_seq_cst) &&
           !locked_.exchange(true, std::memory_order_seq_cst);
  }
  void lock() noexcept;
  void unlock() noexcept { locked_.store(false, std::memory_order_seq_cst); }

  // Lock held: takes up to flush_size queued requests, posts them, asks their completion,
  // polls the context and ends what completed. Returns the work done.
  std::size_t run_once();
  // Lock held: carries out one request now (direct injection) and asks its completion.
  void post_now(command& c);
  // Delegate: runs the lane while this thread can take its lock and requests are queued.
  void drive() noexcept;

  fabric::thread_context& context() noexcept { return *context_; }
  [[nodiscard]] const engine_options& options() const noexcept { return st_.options; }
  void watch(request_record& r) noexcept;
  void finish(request_record& r, fabric::outcome how, std::exception_ptr failure) noexcept;
  void execute_transfer(command& c);
  // One-sided calls: the context's channels for the run in progress (detail::open_channels).
  bool open_channels(command& c) noexcept;
  // A one-sided command the lane is done with (written, or ended without a write): the run it
  // held may end (engine::submit_one_sided).
  void release_run_hold(command& c) noexcept;
  // Consumption-notified calls of an earlier run (they ran: that run ended) are ended done
  // before the channels their synchronizers count in are replaced.
  void settle_earlier_run() noexcept;
  void count_one_sided() noexcept {
    st_.counters.one_sided.fetch_add(1, std::memory_order_relaxed);
  }

  // The lane's context's job-wide id (set before started_; read after wait_started).
  [[nodiscard]] fabric::thread_id id() const noexcept { return id_; }
  // CPU time the executor thread used so far (seconds; 0 without a thread).
  [[nodiscard]] double executor_cpu_seconds() const noexcept;

  command_queue<command> queue;
  std::atomic<std::uint64_t> in_flight{0};
  const std::uint16_t index;

 private:
  // A destination process: the transmitter (made on first use) and the transfers posted on
  // it, oldest first (each completes once its flush ticket did; tickets complete in order).
  struct destination {
    std::unique_ptr<transfer::transmitter> transmitter;
    request_record* oldest = nullptr;
    request_record* newest = nullptr;
    bool touched = false;  // posted on since the last completion request
    transfer::completion_tag settled_by{};  // shutdown: everything posted before it
    signed char gets_are_messages = -1;      // -1: not known yet
    fabric::deadline_clock::time_point gather_again_at{};  // a gather's reply came late
    bool endpoint_counted = false;  // engine_counters::endpoints
  };
  void count_endpoint(destination& d) noexcept;
  // A one-sided call went out since the last flush_one_sided: its channel may hold it in an
  // open aggregate, and across machines UCX may still hold its bytes.
  bool one_sided_unflushed_ = false;
  // The channels held records queued for room at the end of the last run_once (the executor
  // does not sleep then); written and read by the lock holder's thread.
  bool channels_queued_ = false;
  // Publishes the channels' aggregates and flushes the context's endpoints (at most
  // transport_wait), so that nothing waits in this context for a poll after the executor slept.
  void flush_one_sided() noexcept;
  void count_call_endpoint(int process);
  // Puts or gets of one region whose remote and local bytes follow each other: one operation
  // (execute_transfer).
  struct open_run {
    transfer_kind kind;
    std::uint32_t region;
    std::uint64_t offset;
    std::byte* local;
    std::size_t size;
    std::uint64_t operand;  // atomics
    std::uint64_t compare;
    request_record* first;  // chained by `next`
    request_record* last;
  };
  void post_run(const open_run& run);
  void post_runs() noexcept;
  // Small gets of one region of a process whose gets UCX emulates with messages (tcp): one
  // send-based call to that process's service role reads every run's bytes and returns them in
  // one reply, which the lane copies into the runs' buffers (instead of one UCX get, a request
  // and a reply, per run). lane.cpp: gather_runs.
  struct gathered_run {
    request_record* first;  // chained by `next`
    std::byte* local;
    std::size_t size;
    std::uint64_t offset;  // in the region
  };
  struct gather {
    std::uint32_t region = 0;
    int process = -1;
    fabric::deadline_clock::time_point reply_by{};  // then the gets go out as gets
    invoke::future<std::string> reply;
    std::vector<gathered_run> runs;  // in the order their bytes are in the reply
  };
  void ensure_destinations();
  [[nodiscard]] bool gets_are_messages(int process);
  bool gather_runs(std::size_t first_run) noexcept;
  void ungather(gather& g) noexcept;
  std::size_t complete_gathers() noexcept;
  void end_gather(gather& g, fabric::outcome how, std::exception_ptr why) noexcept;
  destination& destination_to(int process);
  transfer::remote_memory& memory_of(std::uint32_t region);
  void execute(command& c) noexcept;
  // Sends a send-based call now, or parks it behind its process's calls not taken yet.
  void send_or_park(command& c) noexcept;
  [[nodiscard]] bool calls_parked(int process) const noexcept;
  void park(command& c);
  // Bundles (engine_options::bundle_bytes): lane.cpp, "Bundles".
  [[nodiscard]] bool bundleable(const command& c) const noexcept;
  [[nodiscard]] bool may_bundle(const command& c) const noexcept;
  fabric::call_status post_bundle(fabric::thread_id dest, std::uint32_t members) noexcept;
  void add_to_bundle(command& c) noexcept;
  struct open_bundle;
  void send_bundles_to(int process) noexcept;
  void send_bundle(const open_bundle& b) noexcept;
  void send_bundles() noexcept;
  std::size_t retry_parked() noexcept;
  void ask_completions() noexcept;
  std::size_t complete_transfers() noexcept;
  void release_lingering() noexcept;
  std::size_t check_watched() noexcept;
  std::size_t poll_context() noexcept;
  void executor_loop();
  void settle_transmitters() noexcept;
  void shutdown() noexcept;

  engine::state& st_;
  alignas(64) std::atomic<bool> locked_{false};
  fabric::thread_context* context_ = nullptr;
  std::optional<fabric::attached_thread> attached_;
  std::vector<destination> destinations_;
  std::vector<int> touched_;
  std::vector<std::unique_ptr<transfer::remote_memory>> memories_;
  // Send-based calls the transport did not take yet, per process, in order, and when to try
  // each process's first again (the gap doubles, up to 64 ms, while it is not taken).
  struct parked_calls {
    std::deque<command> calls;
    fabric::deadline_clock::time_point retry_at{};
    std::chrono::microseconds gap{0};
  };
  std::vector<parked_calls> parked_;
  std::size_t parked_count_ = 0;
  std::size_t retry_front(parked_calls& p) noexcept;
  std::size_t retry_one(parked_calls& p, command& c) noexcept;  // retry_front's work
  std::optional<std::size_t> bundle_parked_front(parked_calls& p) noexcept;
  std::vector<open_run> runs_;  // open until the batch ends (flush_size of them at most)
  std::size_t run_count_ = 0;
  std::vector<std::unique_ptr<gather>> gathers_;  // replies awaited
  // Calls of this batch to one thread that travel as one message: copies of their commands in
  // bundle_members_ (in the order taken, linked by `next`), sent when the batch ends, when a
  // send-based request to that thread cannot join them (it must follow them), or when the
  // next would not fit. Both vectors are sized at construction: a batch takes flush_size
  // requests at most, and members' slots are reused only by the next batch.
  struct open_bundle {
    fabric::thread_id dest = 0;
    int process = -1;
    std::uint32_t first = 0;  // in bundle_members_
    std::uint32_t last = 0;
    std::uint32_t count = 0;
    std::size_t bytes = 0;
  };
  struct bundle_member {
    command c;
    std::uint32_t next = 0;
  };
  std::vector<open_bundle> bundles_;  // open now, in the order they were opened
  std::vector<bundle_member> bundle_members_;
  std::size_t members_used_ = 0;
  std::size_t bundle_limit_ = 0;       // bytes; 0: no bundles
  std::vector<std::byte> bundle_scratch_;  // the message being made (capacity bundle_limit_)
  request_record* watched_ = nullptr;  // call_returns whose futures the holder reads
  request_record* lingering_ = nullptr;  // dead peers' transfers UCX has not let go of
  std::thread thread_;
  clockid_t cpu_clock_{};  // the executor thread's (written before started_ is set)
  fabric::thread_id id_ = 0;  // likewise
  std::atomic<int> started_{0};  // 1: attached and running, -1: failed (start_error_)
  std::exception_ptr start_error_;
};

}  // namespace detail
}  // namespace seriema::offload
