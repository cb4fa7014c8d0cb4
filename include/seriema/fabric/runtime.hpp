// The per-process runtime: bootstrap, placement, the UCX context and process worker, endpoints
// to every rank, registered arenas per zone, and a barrier that keeps UCX progressing.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <functional>
#include <optional>
#include <seriema/fabric/attached_thread.hpp>
#include <seriema/fabric/bootstrap.hpp>
#include <seriema/fabric/detail/settings.hpp>
#include <seriema/fabric/detail/staged_sends.hpp>
#include <seriema/fabric/detail/thread_state.hpp>
#include <seriema/fabric/placement.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/transfer/detail/ucx_forward.hpp>
#include <seriema/transfer/memory.hpp>
#include <seriema/transfer/options.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace seriema::fabric {

/// How a runtime is built: threads, limits, placement, UCX, memory and bootstrap. Defaults are
/// the SERIEMA_* settings' defaults; from_environment() reads them (docs/running.md).
struct runtime_options {
  int threads_per_process = 1;  ///< SERIEMA_THREADS
  int service_threads = 0;      ///< SERIEMA_SERVICE_THREADS: 0 (workers take the role) or 1
  int helper_threads = 1;       ///< SERIEMA_HELPER_THREADS: serve threads in a helped_section
  /// SERIEMA_ATTACH_SLOTS: contexts per process that other threads attach to (runtime::attach);
  /// equal on every rank (checked at startup).
  int attach_slots = 4;
  std::size_t send_limit = std::size_t{1} << 20;  ///< SERIEMA_SEND_LIMIT: max send-based payload
  /// SERIEMA_REPLY_CELLS: reply cells per thread (outstanding small call_returns whose value a
  /// same-machine callee writes directly; 0: every reply travels as a message).
  std::uint32_t reply_cells = 256;
  /// SERIEMA_TIMEOUT: the deadline of a wait given none (0: none). See docs/failures.md.
  std::chrono::milliseconds timeout{0};
  /// SERIEMA_COUNTERS: where each process writes its counters as JSON when run() ends ("{rank}"
  /// in it is replaced by the process's rank; empty: nowhere). See docs/monitoring.md.
  std::string counters_path;
  placement_options placement;     ///< Where processes and threads run (SERIEMA_PLACEMENT, ...).
  transfer::context_options ucx;   ///< The UCX context: peer-error handling, keepalive.
  transfer::arena_options memory;  ///< Registered arenas: memory source, pages, segment size.
  bootstrap_options boot;          ///< How ranks find each other (PMIx, seriema-run, single).
  /// Reads every SERIEMA_* setting after config::check_environment() checked the settings of
  /// every linked layer; throws config_error naming every bad or contradicting one, and every
  /// unknown SERIEMA_* variable, one line each.
  static runtime_options from_environment();
};

struct write_message;    // detail/messages.hpp
struct barrier_message;  // src/fabric/runtime/runtime_collectives.cpp

/// The per-process runtime: bootstrap, placement and binding, the UCX context and process
/// worker, endpoints to every rank, registered arenas per NUMA zone, collectives, and run(),
/// which runs a body on every worker thread until the whole job is quiet.
///
/// Thread-safety: construction, the collectives, run() and finalize() on one thread (the
/// main thread); endpoint(), arena_for_zone(), resolve(), peer_failed() and the accessors from
/// any thread. Errors: the constructor throws seriema::error (config_error for a bad setting,
/// ucx_error when UCX refuses); collectives throw as described at barrier().
class runtime {
 public:
  /// Starts this process's part of the job (collective: every rank constructs one). Throws
  /// seriema::error when a setting, the bootstrap, placement or UCX fails.
  explicit runtime(const runtime_options& options = runtime_options::from_environment());
  ~runtime();  ///< finalize() if not done (errors are reported, never thrown)
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  [[nodiscard]] int rank() const noexcept { return boot_->rank(); }  ///< This process's rank.
  [[nodiscard]] int size() const noexcept { return boot_->size(); }  ///< Processes in the job.
  /// The machine this process runs on (0..machine count - 1).
  [[nodiscard]] int machine() const noexcept { return boot_->machine(); }
  /// The machine process `rank` runs on.
  [[nodiscard]] int machine_of(int rank) const noexcept { return boot_->machine_of(rank); }
  /// Whether process `rank` runs on this machine (then its UCX-allocated memory maps directly).
  [[nodiscard]] bool same_machine(int rank) const noexcept { return machine_of(rank) == machine(); }
  /// The bootstrap the job started with (allgather and barrier without UCX).
  [[nodiscard]] bootstrap& boot() noexcept { return *boot_; }
  /// Where processes and threads run on the hardware. With machines emulated by seriema-run on
  /// one host, it describes that host shared by all ranks; which (emulated) machine a rank
  /// belongs to is machine_of(), never the placement's machine field.
  [[nodiscard]] const fabric::placement& placement() const noexcept { return *placement_; }
  /// The network devices this process restricted UCX to (UCX_NET_DEVICES names; empty: UCX
  /// chose). Normally placement().net_devices(rank()); empty when the user set UCX_NET_DEVICES
  /// or UCX could use none of them (logged). See SERIEMA_NET_DEVICES.
  [[nodiscard]] const std::vector<std::string>& net_devices() const noexcept;
  /// The process's UCX context (include <seriema/transfer/ucx.hpp> to use it).
  [[nodiscard]] transfer::ucx_context& context() noexcept { return *context_; }
  /// The process-wide worker (shared by threads). Endpoints below belong to it.
  [[nodiscard]] transfer::ucx_worker& worker() noexcept { return *worker_; }
  /// UCX worker address of every rank, as exchanged at startup.
  [[nodiscard]] std::span<const std::byte> worker_address(int rank) const;

  /// The endpoint from the process worker to `rank` (created on first use).
  transfer::ucx_endpoint& endpoint(int rank);
  /// The arena of NUMA zone `zone` (OS index), created on first use; local_arena(): this
  /// process's zone.
  transfer::arena& arena_for_zone(int zone);
  transfer::arena& local_arena();  ///< The arena of this process's zone.
  /// The remote allocation service's allocator for zone `zone` (general allocator, best fit,
  /// over that zone's arena), and the matching free. Thread-safe.
  transfer::registered_buffer service_allocate(int zone, std::size_t bytes);
  /// Frees what service_allocate returned at `address` (`size` as allocated); false when no
  /// such allocation is live (nothing freed).
  [[nodiscard]] bool service_free(std::uint64_t address, std::uint64_t size);
  /// Lets write messages land in [address, + size): memory this process registered itself (a
  /// transfer::shared_region), as they land in what service_allocate returned, until
  /// service_withdraw. Thread-safe.
  void service_expose(std::uint64_t address, std::uint64_t size);
  /// Ends service_expose of the same range: no write message lands there from the return on.
  void service_withdraw(std::uint64_t address, std::uint64_t size);
  /// Lends what service_allocate returned at `address` (`size` as allocated), after this
  /// process wrote it, to a peer that reads it and then gives it back with service_return (the
  /// pieces of a large call_return value). Thread-safe.
  void service_lend(std::uint64_t address, std::uint64_t size);
  /// Frees memory lent by service_lend, once; false (nothing freed) when it is not lent now: a
  /// duplicate or stale return, or a peer naming memory nobody lent it.
  [[nodiscard]] bool service_return(std::uint64_t address, std::uint64_t size);
  /// Applies a write message: when [m.base, m.base + m.size) is a live allocation of the
  /// service, exactly as service_allocate returned it, and both ranges lie inside it, copies
  /// `data` to m.base + m.data_offset and then stores m.word there (release). False (nothing
  /// written) otherwise. Holds the writable-ranges lock throughout, so a concurrent
  /// service_free cannot free the target in between. Targets are known by (start, size) only:
  /// a write aimed at a freed allocation lands if the same range was allocated again (the
  /// messenger never sends one: chunks are freed only once the job is quiet).
  [[nodiscard]] bool service_write(const write_message& m, std::span<const std::byte> data);
  /// Resolves a locator for use from this process: direct pointer access only when the owner is
  /// on this machine (so --machines N really takes the inter-machine path).
  transfer::remote_memory resolve(const transfer::remote_memory_locator& locator);

  /// Collectives over all ranks (one thread per process calls them, in the same order on every
  /// rank), progressing the worker while they wait (one-sided traffic over TCP needs the target
  /// to progress). Each ends by its deadline: the forms without one use now + SERIEMA_TIMEOUT,
  /// or none when that is off (default_deadline()). They throw seriema::error naming the dead
  /// rank when a peer fails, and deadline_error naming the ranks that had not arrived when the
  /// deadline passes. After a deadline the collectives of this runtime are broken, as an MPI
  /// communicator is revoked: every later one (run()'s end and finalize()'s barrier too) throws
  /// at once, repeating the first cause; the job should end (docs/failures.md).
  void barrier() { barrier(default_deadline()); }
  /// barrier() ending by `deadline`.
  void barrier(deadline_clock::time_point deadline);
  /// Collective exchange of small blobs (control path): a progressing barrier (bounded by the
  /// deadline), then the bootstrap's allgather, so a peer finishing one-sided operations on us
  /// is never stranded. Once every rank passed the barrier the allgather completes unless a
  /// rank dies in between.
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) {
    return allgather(mine, default_deadline());
  }
  /// allgather() ending by `deadline`.
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine,
                                                deadline_clock::time_point deadline);
  /// Sum of `value` over all ranks; a progressing collective like barrier().
  std::uint64_t allreduce_sum(std::uint64_t value) {
    return allreduce_sum(value, default_deadline());
  }
  /// allreduce_sum() ending by `deadline`.
  std::uint64_t allreduce_sum(std::uint64_t value, deadline_clock::time_point deadline);
  /// now + SERIEMA_TIMEOUT when it is set, else no_deadline.
  [[nodiscard]] deadline_clock::time_point default_deadline() const noexcept;

  /// Runs body(ctx) on every worker thread of this process (SERIEMA_THREADS of them, pinned as
  /// the placement says), plus the service thread when configured. Returns when every body has
  /// returned and the whole job is quiet: every call sent anywhere has been executed (threads
  /// keep serving calls until then). Collective: every process calls it. Rethrows the first
  /// exception a body threw, after the others finished.
  ///
  /// Its end has no deadline (not even SERIEMA_TIMEOUT: other ranks' bodies may rightly run for
  /// long); it ends early only when a rank fails: throws seriema::error naming it, once UCX
  /// reports it dead or the launcher reports that it left the job before finalize()
  /// (docs/failures.md). Use run(body, deadline) to bound the wait for stalled ranks.
  void run(const std::function<void(thread_context&)>& body) { run(body, no_deadline); }
  /// run(body) whose end is bounded: the termination rounds (the job-wide check that every call
  /// sent was executed), the flushes they ask of this process's threads, and the exit barrier
  /// end by `deadline`. Past it, throws seriema::deadline_error: on rank 0 naming the ranks that
  /// did not arrive ("run()'s termination round #4 on rank 0: deadline passed after 5.000 s
  /// with rank(s) 1 not arrived"), on the others saying that rank 0 did not release them. The
  /// collectives are broken after that, as after any collective's deadline: the job should end.
  /// The bodies themselves are not interrupted (bound their waits with deadline_scope): a body
  /// still running at the deadline makes its process late for the rounds.
  void run(const std::function<void(thread_context&)>& body, deadline_clock::time_point deadline);
  /// run() with a body that returns something to drive rather than nothing: a coroutine
  /// (`[](thread_context& me) -> seriema::task<> { co_await ...; }`, include
  /// <seriema/invoke/task.hpp>). Each worker starts its task and serves calls until it ended;
  /// what the task threw is rethrown as a plain body's exception is.
  template <class Body>
    requires(!std::is_void_v<std::invoke_result_t<Body&, thread_context&>>)
  void run(Body body) {
    run(std::move(body), no_deadline);
  }
  /// run(body, deadline) with a coroutine body (see run(Body)).
  template <class Body>
    requires(!std::is_void_v<std::invoke_result_t<Body&, thread_context&>>)
  void run(Body body, deadline_clock::time_point deadline) {
    using returned = std::invoke_result_t<Body&, thread_context&>;
    static_assert(requires(returned r, thread_context& me) { drive_body(std::move(r), me); },
                  "runtime::run: a body returns void or a seriema::task<> (include "
                  "<seriema/invoke/task.hpp>); this one returns something else");
    run(std::function<void(thread_context&)>(
            [&body](thread_context& me) { drive_body(body(me), me); }),
        deadline);
  }
  /// run(body, now + `timeout`), for either kind of body.
  template <class Body, class Rep, class Period>
  void run(Body&& body, std::chrono::duration<Rep, Period> timeout) {
    run(std::forward<Body>(body),
        deadline_clock::now() + std::chrono::duration_cast<deadline_clock::duration>(timeout));
  }

  /// Gives the calling thread (not one of run()'s workers: a pool thread, main, a short-lived
  /// std::thread) one of this process's SERIEMA_ATTACH_SLOTS contexts until the returned handle
  /// is destroyed; inside or outside run(). See attached_thread for what it can do. Any thread.
  /// Throws seriema::error when every slot is held (naming SERIEMA_ATTACH_SLOTS).
  attached_thread attach();
  /// attach(), waiting for a slot to be given back until `deadline`; throws deadline_error then.
  attached_thread attach(deadline_clock::time_point deadline);
  /// The job-wide id of attach slot `slot` of process `rank`: after every worker's,
  /// placement().thread_count() + rank * SERIEMA_ATTACH_SLOTS + slot.
  [[nodiscard]] thread_id attached_id(int rank, int slot) const noexcept;
  /// Whether `id` names an attach slot (of any process).
  [[nodiscard]] bool is_attached_id(thread_id id) const noexcept;
  /// How many of this process's attach slots are held right now.
  [[nodiscard]] int attached_threads() const noexcept;

  /// Final barrier (bounded by the deadline; default_deadline() when none is given) and
  /// teardown of endpoints. Idempotent: the first call does the work, whether its barrier
  /// succeeded or threw. Refused (seriema::error) from inside run() (a body or a call it runs):
  /// the other threads still use the runtime; and while threads are attached (they end their
  /// attached_thread first). The destructor calls finalize() when nobody did.
  void finalize() { finalize(default_deadline()); }
  /// finalize() whose barrier ends by `deadline`.
  void finalize(deadline_clock::time_point deadline);

  /// Peer failure (docs/failures.md). A process is dead once any endpoint to it reported an
  /// error (UCX peer error handling, keepalive): from then on calls to it fail at once, reply
  /// slots waiting for it end as may_have_executed, and failure_epoch() has moved on so that
  /// each thread's next poll fails what its messengers hold for it. Any thread.
  [[nodiscard]] bool peer_failed(int rank) const noexcept {
    return dead_ != nullptr && rank >= 0 && rank < size() &&
           dead_[static_cast<std::size_t>(rank)].load(std::memory_order_acquire);
  }
  /// Bumped once per process found dead: a thread that saw another value acts on the news.
  [[nodiscard]] std::uint64_t failure_epoch() const noexcept {
    return failure_epoch_.load(std::memory_order_acquire);
  }
  /// Records that `rank` died (`status`: UCX's reason); the first report says so on stderr and
  /// fails this process's reply slots waiting for it. Safe inside UCX callbacks.
  /// `reported_by`: the survivor that announced it (a collective's failure notice), or -1.
  void note_peer_failure(int rank, transfer::ucx_status_code status,
                         int reported_by = -1) noexcept;
  /// Records that the launcher reported `rank` gone before it finalized (`how` it left, e.g.
  /// "seriema-run: exited with status 0 before finalize"), as note_peer_failure does. The
  /// bootstrap's watch (bootstrap::watch_peers) calls it; any thread.
  void note_peer_left(int rank, const std::string& how) noexcept;
  /// The ranks known dead, for messages ("rank 1 (Connection reset by remote peer)").
  [[nodiscard]] std::string describe_failed_peers() const;
  /// "rank 1 (Connection reset by remote peer)" for one dead rank.
  [[nodiscard]] std::string describe_failed_peer(int rank) const;

  /// The options this runtime was built with.
  [[nodiscard]] const runtime_options& options() const noexcept { return options_; }

  // --- machinery used by thread_context, the receive path and the invoke layer; not for
  // applications (left out of the API reference) ---
  /// @cond INTERNAL
  [[nodiscard]] local_thread_state& local_state(thread_id id);
  /// The service thread's state (persists across runs like the workers').
  [[nodiscard]] local_thread_state& service_state() noexcept { return *service_state_; }
  [[nodiscard]] bool is_local(thread_id id) const noexcept;
  /// The process of a worker id, an attach slot's id or service_of(process); -1 for anything
  /// else. O(1).
  [[nodiscard]] int process_of_thread(std::uint32_t id) const noexcept;
  /// ~attached_thread: hands slot `slot`, whose context is `context`, back to the process.
  void detach(int slot, thread_context& context) noexcept;
  /// The state whose reply slots a reply to `caller` names: a local thread's, this process's
  /// service role's (a service call that made a call_return), or null.
  [[nodiscard]] local_thread_state* reply_owner(thread_id caller) noexcept;
  [[nodiscard]] invocation_counters& counters() noexcept { return counters_; }
  /// The queue of received calls for a destination of this process (a local thread, or this
  /// process's service role); null when it names none here.
  [[nodiscard]] call_queue* queue_of(std::uint32_t destination) noexcept;
  /// Whether `source` names a thread or a service role of the job.
  [[nodiscard]] bool source_exists(std::uint32_t source) const noexcept;
  [[nodiscard]] call_queue& service_queue() noexcept { return service_queue_; }
  /// Takes the service role if nobody holds it: progresses the process worker and runs queued
  /// service calls with `self` as the serving context. Returns the number of calls run.
  std::size_t serve(thread_context& self);
  /// The reply cells of process `rank` when this process can write them with plain stores (this
  /// process, or one on this machine whose region maps: ucp_rkey_ptr); empty otherwise, and then
  /// replies to it travel as am_id_reply messages. Resolved on first use; any thread.
  std::span<std::byte> reply_cells_of(int rank);
  /// Progresses the process worker unless another thread is at it right now (a thread waiting
  /// for its own send must keep wireup and incoming traffic moving, service thread or not).
  void progress_shared() noexcept;
  [[nodiscard]] bool has_service_thread() const noexcept { return options_.service_threads > 0; }
  /// Wakes the helper threads sleeping for want of an offered context (helped_section, run end).
  void wake_helpers() noexcept {
    helper_signal_.fetch_add(1, std::memory_order_acq_rel);
    helper_signal_.notify_all();
  }
  /// Whether a run() is in progress in this process (its workers exist). Any thread.
  [[nodiscard]] bool in_run() const noexcept {
    return running_runs_.load(std::memory_order_acquire) > 0;
  }
  /// Number of run() calls started so far (thread contexts of run k carry epoch k).
  [[nodiscard]] std::uint64_t run_epoch() const noexcept {
    return run_epoch_.load(std::memory_order_acquire);
  }
  /// thread_context::quiesce: the job-wide quiescence barrier of run()'s workers
  /// (src/fabric/runtime/quiesce.cpp).
  void quiesce(thread_context& self, deadline_clock::time_point deadline);
  /// Messages this process sent / consumed, send-based and one-sided (quiescence detection).
  [[nodiscard]] std::uint64_t messages_sent() const noexcept;
  [[nodiscard]] std::uint64_t messages_consumed() const noexcept;
  /// @endcond

 private:
  /// The threads and the coordinator of one run() (src/fabric/runtime/run_loop.cpp).
  class run_loop;
  /// quiesce()'s state (src/fabric/runtime/runtime_internal.hpp), and its two roles: the last
  /// worker of a process to arrive leads its rounds, the others follow.
  struct quiescence;
  void lead_quiescence(thread_context& self, quiescence& q, deadline_clock::time_point deadline);
  /// `seen_round`: the round counter read before this worker arrived.
  void follow_quiescence(thread_context& self, quiescence& q, std::uint64_t generation,
                         std::uint64_t seen_round, deadline_clock::time_point deadline);
  /// Construction steps: placement of the job and binding of this process; the active-message
  /// handlers on the process worker; the startup exchange of reply-region locators and worker
  /// addresses.
  void place_and_bind();
  void register_handlers();
  void exchange_addresses();

  /// The active-message handlers registered on the process worker
  /// (src/fabric/runtime/runtime_internal.hpp).
  struct am_handlers;
  friend struct am_handlers;

  runtime_options options_;
  std::unique_ptr<bootstrap> boot_;
  std::unique_ptr<fabric::placement> placement_;
  std::unique_ptr<transfer::ucx_context> context_;
  std::unique_ptr<transfer::ucx_worker> worker_;
  std::vector<std::vector<std::byte>> addresses_;
  std::mutex endpoints_mutex_;
  std::vector<std::unique_ptr<transfer::ucx_endpoint>> endpoints_;
  std::mutex arenas_mutex_;
  std::vector<std::unique_ptr<transfer::arena>> arenas_;  ///< indexed by zone OS index
  std::mutex service_allocators_mutex_;
  /// Destroyed before arenas_ (they return their blocks to them): declared after.
  std::vector<std::unique_ptr<transfer::general_allocator>> service_allocators_;  ///< by zone
  /// Live service allocations (start -> size) that write messages may target. A lock of its own,
  /// never held while calling UCX (the allocators' lock is, while an arena grows), because the
  /// write handler takes it inside the process worker's progress. Entries are added after the
  /// allocation and removed before the free.
  std::mutex writable_mutex_;
  std::unordered_map<std::uint64_t, std::uint64_t> writable_;
  /// Service allocations lent to a peer (start -> size), until it gives them back. The lender
  /// enters an allocation after writing it and the return takes it out before the free, both
  /// under this lock: so the lender's writes happen before the free, and before whatever the
  /// memory is allocated for next, in this process's own synchronization too (the real order
  /// runs through the peer, which ThreadSanitizer does not see).
  std::mutex lent_mutex_;
  std::unordered_map<std::uint64_t, std::uint64_t> lent_;
  void check_registries();
  /// Throws seriema::error naming the dead ranks when any rank has failed (`what`: the
  /// collective, for the message).
  void throw_if_peers_failed(const char* what);

  /// Barrier state: written by the AM handler on whichever thread progresses the process worker
  /// (worker threads taking the service role, too), read by the thread inside barrier(): atomic.
  std::atomic<std::uint64_t> barrier_arrivals_[2] = {0, 0};  ///< rank 0: arrivals per epoch parity
  std::atomic<std::uint64_t> barrier_sums_[2] = {0, 0};      ///< rank 0: sum of values per parity
  std::atomic<std::uint64_t> barrier_released_{0};           ///< epochs released (non-zero ranks)
  std::atomic<std::uint64_t> barrier_result_{0};             ///< total carried by the release
  std::uint64_t barrier_epoch_ = 0;  ///< owner: the thread calling barrier()
  // rank 0: per rank, 1 + the latest epoch it arrived at (the AM handler writes, the thread in
  // the collective reads: which ranks a deadline found missing).
  std::unique_ptr<std::atomic<std::uint64_t>[]> barrier_arrived_;
  /// Set when a collective passed its deadline (owner: the thread calling collectives): the
  /// epochs no longer agree across ranks, so every later collective throws this at once.
  std::string collectives_broken_;
  /// The collective at the core of barrier() and allreduce_sum(); `what` names it in errors.
  /// A worker that takes part itself (quiesce's leader) passes its context as `serving`: it
  /// keeps running the calls sent to it while it waits, since a worker that has not reached the
  /// collective yet may be waiting for one of their replies.
  std::uint64_t collective_sum(std::uint64_t value, deadline_clock::time_point deadline,
                               const char* what, thread_context* serving = nullptr);
  /// Sends a collective's message to rank `to` by `deadline` (else breaks the collectives); throws
  /// seriema::error when `to` failed. Messages UCX could not take at once wait in
  /// barrier_staged_ (one per rank), so a deadline can leave them to UCX.
  void send_barrier_message(int to, const barrier_message& message,
                            deadline_clock::time_point deadline, const char* what);
  detail::staged_sends barrier_staged_;  ///< owner: the thread calling collectives
  /// Throws deadline_error(text) and breaks the collectives (collectives_broken_).
  [[noreturn]] void break_collectives(const std::string& text);
  /// Ranks (other than 0) that have not arrived at `epoch` yet, for rank 0's messages.
  [[nodiscard]] std::string ranks_missing_from(std::uint64_t epoch) const;
  bool finalized_ = false;

  /// Reply cells (reply_cells.hpp): this process's region, (threads + 1 for the service role) x
  /// options_.reply_cells cells, null when there are none; every rank's region locator (invalid
  /// when it has none), exchanged at startup; and where each rank's region is writable from
  /// here, resolved on first use under reply_peers_mutex_ (state: 0 not yet, 1 writable, 2 not).
  std::unique_ptr<transfer::shared_region> reply_region_;
  std::vector<transfer::remote_memory_locator> reply_locators_;
  struct reply_peer {
    std::atomic<int> state{0};
    std::span<std::byte> cells;       ///< set before state becomes 1 (release)
    std::optional<transfer::remote_memory> mapping;  ///< holds the rkey the pointer came from
  };
  std::mutex reply_peers_mutex_;
  std::unique_ptr<reply_peer[]> reply_peers_;
  void attach_reply_cells();

  /// By local index: the workers' (0..threads - 1), then the attach slots' (threads + slot).
  std::vector<std::unique_ptr<local_thread_state>> local_states_;
  std::unique_ptr<local_thread_state> service_state_;  ///< made by the constructor
  std::unique_ptr<quiescence> quiescence_;             ///< made by the constructor
  call_queue service_queue_;
  invocation_counters counters_;
  std::string counters_file_;  ///< SERIEMA_COUNTERS resolved for this rank (empty: none)
  std::atomic<bool> service_role_taken_{false};  ///< someone is progressing the process worker
  std::atomic<bool> service_running_{false};     ///< someone is running service calls
  /// Service calls taken from service_queue_ and not run yet; used only by the thread that set
  /// service_running_ (a service call that throws leaves the rest here for the next serve).
  std::deque<call_queue::item> service_pending_;
  std::atomic<bool> service_leftover_{false};  ///< service_pending_ is not empty (for the skip)
  std::atomic<std::uint64_t> run_epoch_{0};
  /// Bumped (and waited on by idle helper threads) when a helped_section opens or a run ends.
  std::atomic<std::uint32_t> helper_signal_{0};
  // Peer failure: one flag per rank (set once), the reason, and a counter bumped after each.
  std::unique_ptr<std::atomic<bool>[]> dead_;
  std::unique_ptr<std::atomic<int>[]> dead_status_;
  std::unique_ptr<std::atomic<int>[]> dead_reporter_;
  /// How the launcher said each rank left (note_peer_left), for describe_failed_peer.
  mutable std::mutex left_mutex_;
  std::vector<std::string> left_how_;
  /// Stops the bootstrap's calls into note_peer_left (teardown, a failed constructor).
  void stop_watching_peers() noexcept;
  std::vector<bool> failures_announced_;  ///< the collective's thread: dead ranks announced
  std::atomic<std::uint64_t> failure_epoch_{0};
  std::atomic<int> running_runs_{0};  ///< inside run(): finalize is refused
  /// Attach slots (src/fabric/runtime/attach.cpp): `held` is taken by CAS and given back
  /// (release) by the holder; `context` is made by the slot's first holder and kept until
  /// teardown, so the pairing state peers keep with the slot's id outlives each holder. While no
  /// thread holds the slot its context is offered to the helper threads (the helped_section
  /// protocol on the slot's poller word). attach_signal_ is bumped and notified whenever a slot
  /// is given back.
  struct attach_slot;
  std::unique_ptr<attach_slot[]> attach_slots_;
  std::atomic<std::uint32_t> attach_signal_{0};
  std::optional<attached_thread> try_attach();
  /// The slot (0..SERIEMA_ATTACH_SLOTS - 1) an attached id names, whatever its process.
  [[nodiscard]] std::size_t attach_slot_of(thread_id id) const noexcept;
  /// Whether the attach slot `id` (of this process) ever had a holder (its context exists).
  [[nodiscard]] bool attach_slot_opened(thread_id id) const noexcept;
  /// finalize(): what the slots' contexts sent is delivered before the final barrier (no
  /// thread holds a slot then, and no helper runs outside run()).
  void flush_attach_slots(deadline_clock::time_point deadline);
  /// Ends every slot's context (teardown, before the local states' transport goes).
  void release_attach_slots() noexcept;
  /// Creates an endpoint to `rank` on `worker` that reports its failure to note_peer_failure.
  friend class thread_context;
  std::unique_ptr<transfer::ucx_endpoint> connect(transfer::ucx_worker& worker, int rank);
};

}  // namespace seriema::fabric
