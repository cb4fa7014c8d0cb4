// MessengerGlobal (channels): a thread's messengers and inbound channels and the registered
// feedback area peers write into; the invoke layer's thread_extension, which poll() runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <seriema/fabric/detail/messages.hpp>
#include <seriema/fabric/detail/thread_extension.hpp>
#include <seriema/fabric/detail/thread_state.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/channel.hpp>
#include <seriema/invoke/detail/inbound_channel.hpp>
#include <seriema/transfer/memory.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <span>
#include <string>
#include <vector>

namespace seriema::invoke {

class messenger;  // detail/messenger.hpp, which includes this header

// MessengerGlobal: a thread's messengers (created on demand, one per destination) and its
// inbound channels, plus the registered feedback area peers write into. The invoke layer's
// thread_extension. Owner: the thread.
class channels final : public fabric::thread_extension {
 public:
  static constexpr std::size_t synchronizer_words = 1024;  // per thread

  explicit channels(thread_context& self);
  ~channels() override;

  [[nodiscard]] thread_context& self() noexcept { return self_; }
  // The run these channels belong to (their chunks are granted for it).
  [[nodiscard]] std::uint64_t run_epoch() const noexcept { return run_epoch_; }
  [[nodiscard]] const messenger_options& options() const noexcept { return options_; }
  // Replaces the options of messengers created from now on (e.g. small chunks in a test).
  void set_options(const messenger_options& options);

  // The messenger to `dest`, created on first use. Throws seriema::error for a bad id.
  messenger& to(thread_id dest) {
    if (dest < out_.size() && out_[dest]) return *out_[dest];
    return create(dest);
  }
  [[nodiscard]] messenger* existing(thread_id dest) noexcept {
    return dest < out_.size() ? out_[dest].get() : nullptr;
  }
  [[nodiscard]] inbound_channel* inbound_from(thread_id sender) noexcept;

  std::size_t poll(thread_context& self) override;
  void flush(thread_context& self) override;
  // A process died: every messenger to one of its threads fails (its queued call_returns end
  // as not executed; later calls to it return peer_failed).
  void peers_failed(thread_context& self) override;

  [[nodiscard]] const receive_counters& received() const noexcept { return received_; }
  // A put-then-call whose put completed but whose call could not be sent.
  void note_failed_put() noexcept { ++received_.failed_puts; }
  // The feedback area (released words, synchronizer counters): registered, in this thread's
  // zone; word i is at feedback_words()[i].
  [[nodiscard]] std::uint64_t* feedback_words() const noexcept {
    return reinterpret_cast<std::uint64_t*>(feedback_.data);
  }
  [[nodiscard]] const transfer::remote_memory_locator& feedback_locator() const noexcept {
    return feedback_locator_;
  }
  [[nodiscard]] std::size_t feedback_word_count() const noexcept { return feedback_.size / 8; }
  // Synchronizer words (indices >= first_synchronizer_word); 0 when none is free. A word
  // released with a non-zero count (notices still to come) is reused only once they all came.
  std::uint32_t acquire_counter_word();
  void release_counter_word(std::uint32_t word) noexcept;
  // Moves the draining words whose count reached zero back to the free list.
  void reclaim_drained_counter_words() noexcept;

  // used by messengers / inbound channels
  void note_queued(messenger& m);  // m has records in its local queue: poll drains it
  // Single writer each (this thread): a relaxed load and a release store, no locked add.
  [[gnu::always_inline]] void count_sent(std::uint64_t n) noexcept {
    auto& counter = self_.state().one_sided_sent;
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_release);
  }
  void count_consumed(std::uint64_t n) noexcept {
    auto& counter = self_.state().one_sided_consumed;
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_release);
  }
  receive_counters& receive_counts() noexcept { return received_; }
  // Sends a notification for `thread`'s feedback word as an active message on `endpoint` (the
  // path for peers that cannot map the words; no reply travels back, so a dead peer cannot
  // stall or break this process).
  void send_feedback(transfer::ucx_endpoint& endpoint, std::uint32_t thread, std::uint32_t word,
                     std::uint64_t value);

  // This thread's counters as one JSON object: {"thread":…, "sent":[{"destination":…, …counters},
  // …], "received":{…}}.
  [[nodiscard]] std::string counters_json() const override;

  // Whether a messenger's peer died (checked now): synchronizers stop waiting then.
  [[nodiscard]] bool any_failed();

  // Adds `value` to word `word` of thread `thread`'s feedback area (a synchronizer's counter):
  // an atomic when the thread is in this process, an active message to its process otherwise.
  // A word the thread does not have is counted there (rejected_feedback), not applied.
  void notify_thread(thread_id thread, std::uint32_t word, std::uint64_t value);

  // Asynchronous remote read (call_buffer_get's async variant): reads all of `origin`, then, on a
  // later poll of this thread, calls done(self, bytes, true), or done(self, {}, false) when the
  // read failed (its process died). Counts as a message in flight until done ran, so runtime::run
  // does not end before it.
  using read_done = std::function<void(thread_context&, std::span<std::byte>, bool)>;
  void read_async(const transfer::remote_memory_locator& origin, read_done done);
  // Asynchronous remote write (the put-then-call primitives): puts `source` into `target` (a
  // direct copy when it is mapped here), then, on a later poll of this thread once the bytes
  // are in the target's memory, calls done(self, {}, true), or done(self, {}, false) when the
  // put failed (target's process died; counted: failed_puts). UCX reads `source` until then:
  // the caller keeps it unchanged. Counts as a message in flight until done ran.
  void put_async(std::span<const std::byte> source, const transfer::remote_memory_locator& target,
                 read_done done);
  [[nodiscard]] std::size_t reads_in_flight() const noexcept { return reads_.size(); }
  // Messengers holding records queued for room (drained by poll()).
  [[nodiscard]] bool has_queued() const noexcept { return !with_queue_.empty(); }

 private:
  thread_context& self_;
  messenger_options options_;
  std::uint64_t run_epoch_;
  transfer::registered_buffer feedback_;
  transfer::remote_memory_locator feedback_locator_;
  std::uint32_t first_synchronizer_word_ = 0;
  std::vector<std::uint32_t> free_counter_words_;
  std::vector<std::uint32_t> draining_counter_words_;  // released with notices still to come
  std::vector<std::unique_ptr<messenger>> out_;  // by destination thread id
  std::vector<messenger*> created_;              // the messengers of out_, in creation order
  std::vector<messenger*> with_queue_;           // those that may hold queued records
  std::vector<std::unique_ptr<inbound_channel>> in_;  // by sender thread id
  std::vector<inbound_channel*> in_list_;             // polled in this order
  std::size_t new_channels_seen_ = 0;
  bool reclaim_pending_ = false;  // a process died: free its senders' channels when not running
  // Frees the inbound channels (and granted chunks not yet adopted) of senders in dead
  // processes, except channels with a call on the stack (retried at the next poll).
  void reclaim_dead_senders(thread_context& self);
  receive_counters received_;
  // Active-message notifications in flight: the header must stay put until UCX is done with it.
  // A deque (stable addresses) that grows when every slot is still queued (a congested socket,
  // a partitioned peer): notices are bounded by the records consumed, so it stays bounded, and
  // the consuming thread never waits for the network here.
  struct feedback_slot {
    fabric::feedback_message message{};
    void* request = nullptr;
  };
  std::deque<feedback_slot> feedback_slots_ = std::deque<feedback_slot>(256);
  std::size_t next_feedback_slot_ = 0;
  // A read_async or put_async in flight (a put's request is its endpoint flush).
  struct pending_read {
    void* request = nullptr;
    bool failed = false;
    bool is_put = false;
    std::vector<std::byte> bytes;  // what a read got; empty for a put
    read_done done;
  };
  std::vector<std::unique_ptr<pending_read>> reads_;  // in start order
  // Counts a failed transfer of `read` (failed_reads or failed_puts).
  void count_failed(const pending_read& read) noexcept;
  std::size_t finish_reads();
  messenger& create(thread_id dest);
};

namespace detail {
[[noreturn]] void throw_no_channels(thread_context& self);
// An attached thread's channels for the run in progress: made on first use, and made anew when
// the ones it has belong to an earlier run (whose receivers and chunks are gone). Null when no
// run is in progress in this process (no receiver exists). The offload engine's executors make
// their one-sided calls through these. Owner thread only, outside any call it is running.
channels* attached_channels(thread_context& self);
// Whether `self` (attached) has channels of an earlier run, which attached_channels would
// replace: what still refers to them (a synchronizer) must be settled first.
bool attached_channels_stale(thread_context& self) noexcept;
// Whether `self`'s channels hold records queued for room (ovfl): its polls must go on.
bool channels_queued(thread_context& self) noexcept;
// Drops an attached thread's channels (its offload lane shuts down): the slot's next holder
// must not find channels of a run it did not open them for.
void close_attached_channels(thread_context& self) noexcept;
}  // namespace detail

// This thread's channels (the extension the invoke layer installed). Throws seriema::error on a
// service thread's context.
[[gnu::always_inline]] inline channels& channels_of(thread_context& self) {
  fabric::thread_extension* ext = self.extension(fabric::layer_slot::invoke_channels);
  if (ext == nullptr) detail::throw_no_channels(self);
  return *static_cast<channels*>(ext);
}

}  // namespace seriema::invoke
