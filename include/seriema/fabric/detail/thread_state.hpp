// What the runtime keeps per local thread across runs (received calls, reply slots, granted
// memory, feedback words, the thread's UCX worker and endpoints) and the process's invocation
// counters: fabric machinery shared by the runtime, thread_context and the invoke layer.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <seriema/fabric/detail/call_queue.hpp>
#include <seriema/fabric/detail/incoming_memory_map.hpp>
#include <seriema/fabric/detail/remote_op_state.hpp>
#include <seriema/fabric/detail/reply_cells.hpp>
#include <seriema/fabric/detail/staged_sends.hpp>
#include <seriema/fabric/outcome.hpp>
#include <seriema/transfer/detail/ucx_forward.hpp>
#include <seriema/transfer/memory.hpp>
#include <span>
#include <vector>

namespace seriema::fabric {

class thread_context;

// Counters of send-based invocation in one process (wire safety: rejected input is counted,
// never run). sent/executed also drive runtime::run's termination.
struct invocation_counters {
  std::atomic<std::uint64_t> sent{0};
  std::atomic<std::uint64_t> executed{0};
  std::atomic<std::uint64_t> rejected_malformed{0};
  std::atomic<std::uint64_t> rejected_unknown_function{0};
  std::atomic<std::uint64_t> rejected_bad_destination{0};
  std::atomic<std::uint64_t> rejected_bad_reply{0};
  // Feedback notifications naming no word (not messages: not part of consumed()).
  std::atomic<std::uint64_t> rejected_feedback{0};
  // Write messages (am_id_write) whose target is not a live service allocation (not messages:
  // the records they carried were never published).
  std::atomic<std::uint64_t> rejected_writes{0};
  // Calls whose serialized arguments did not deserialize (the call counts as executed: its
  // message was dealt with; the function did not run).
  std::atomic<std::uint64_t> rejected_arguments{0};
  // Calls the AM handler handed straight to their destination thread because that thread was
  // the one progressing the process worker (no locked queue; counted, not part of consumed()).
  std::atomic<std::uint64_t> handed_to_poller{0};
  // call_return replies this process wrote straight into the reply cell of a caller in another
  // process on this machine (counted as sent and executed here; a reply such a write finds
  // closed or stale counts in rejected_bad_reply here, not at the caller).
  std::atomic<std::uint64_t> replies_direct{0};
  // Calls whose reply the called function made later (a coroutine or future it returned, the
  // invoke layer's deferred replies) and tasks spawned on a thread: started / finished. A started
  // one counts as a message sent until it finished, so runtime::run and quiescence wait for it.
  std::atomic<std::uint64_t> deferred_started{0};
  std::atomic<std::uint64_t> deferred_finished{0};
  // Futures' replies whose bytes did not deserialize into the value type (the future ended
  // not_executed; not messages: the reply itself was consumed).
  std::atomic<std::uint64_t> rejected_results{0};
  // Exceptions of called functions sent back to their caller's future (not raised here).
  std::atomic<std::uint64_t> exceptions_returned{0};
  // Futures that failed and were destroyed without anyone looking at how (the first is logged).
  std::atomic<std::uint64_t> failed_futures_unobserved{0};

  // Messages that arrived and were dealt with: run, or rejected.
  [[nodiscard]] std::uint64_t consumed() const noexcept {
    return executed.load(std::memory_order_acquire) + rejected() ;
  }
  [[nodiscard]] std::uint64_t rejected() const noexcept {
    return rejected_malformed.load(std::memory_order_relaxed) +
           rejected_unknown_function.load(std::memory_order_relaxed) +
           rejected_bad_destination.load(std::memory_order_relaxed) +
           rejected_bad_reply.load(std::memory_order_relaxed);
  }
};

// Registered memory a sender obtained in this thread's NUMA zone through the allocation service
// (the paper's "incoming memory map" entry): the invoke layer's chunks, handed to the receiving
// thread in the order the sender allocated them.
struct granted_memory {
  std::uint32_t sender = 0;       // global thread id of the sender
  std::uint64_t run = 0;          // runtime::run epoch it belongs to
  std::uint32_t batch = 0;        // the sender's allocation batch (0 = the channel's first)
  transfer::registered_buffer memory;
};

// State of one local thread that must outlive its thread_context: calls may arrive before the
// thread starts and replies after it stopped waiting. Owned by the runtime.
struct local_thread_state {
  struct reply_entry {
    void* value = nullptr;
    std::size_t size = 0;
    // A reply of any size (a serialized value): appended here instead of copied to `value`.
    std::vector<std::byte>* bytes = nullptr;
    std::atomic<int>* state = nullptr;
    std::uint32_t generation = 0;
    int process = -1;  // where the call went (fail_pending_to)
  };
  call_queue incoming;
  // The thread's reply cells (small values; attached by the runtime when it has a reply region).
  reply_cell_table cells;
  std::mutex replies_mutex;            // owner thread and receive path
  std::vector<reply_entry> replies{1};  // index 0 unused (0 = "no reply")
  std::vector<std::uint32_t> free_replies;
  // What failure replies carried (a remote exception's type and text), by the slot (cell or
  // entry) and generation they failed. Written under replies_mutex by the deliverer before it
  // ends the slot (so an owner that read the failure finds it); taken by the owner.
  struct failure_details {
    std::uint32_t index = 0;
    std::uint32_t generation = 0;
    std::vector<std::byte> bytes;
  };
  std::vector<failure_details> failures;
  // The details a failure reply left for slot (index, generation), moved out (empty: none).
  std::vector<std::byte> take_failure_details(std::uint32_t index,
                                              std::uint32_t generation) noexcept;

  // Writes `value` into reply slot (index, generation) and ends it done (or, when `result` is
  // a failure outcome, ends it so, keeping `value` as the failure's details when not empty);
  // false (nothing written) when the slot is unknown, stale or of another size, or the outcome
  // is not one a reply carries: a peer's bad reply. Slots with reply_cell::index_bit are this
  // thread's cells, the others table entries.
  bool deliver_reply(std::uint32_t index, std::uint32_t generation,
                     std::span<const std::byte> value, outcome result) noexcept;
  // deliver_reply for a table entry, under replies_mutex.
  bool deliver_to_entry(std::uint32_t index, std::uint32_t generation,
                        std::span<const std::byte> value, outcome result) noexcept;
  // Keeps a failure's details for slot (index, generation) (false: out of memory).
  bool keep_failure_details(std::uint32_t index, std::uint32_t generation,
                            std::span<const std::byte> details) noexcept;
  // Process `process` died: every reply slot (table entry or cell) still waiting for a call to
  // it ends with `why`. Any thread of this process. Returns how many.
  std::size_t fail_pending_to(int process, outcome why) noexcept;

  // Incoming memory map (wait-free grants; see incoming_memory_map.hpp). Writers: the
  // allocation service (any thread serving calls); reader: the owner thread, which takes
  // entries out.
  detail::incoming_memory_map<granted_memory> granted;
  std::atomic<std::size_t> first_grants{0};  // entries of batch 0 ever granted (new channels)
  // One sender's allocation batch, visible to the owner's takes all at once (see the map).
  void grant(std::span<const granted_memory> batch);
  // Owner: moves out every entry `which` selects, in grant order.
  template <class Which>
  std::vector<granted_memory> take_granted(Which which) {
    return granted.take(which);
  }
  // Owner, right after take_granted: a grant was still being linked (look again later).
  [[nodiscard]] bool grant_in_flight() const noexcept { return granted.in_flight(); }

  // The layer above's feedback words (registered memory peers write into: the invoke layer's
  // released counts and synchronizers), published so that a notification arriving as an active
  // message (am_id_feedback) can be applied here. Guarded by feedback_mutex: the handler runs on
  // whichever thread progresses the process worker; the owner sets and clears the area.
  std::mutex feedback_mutex;
  std::uint64_t* feedback_words = nullptr;
  std::size_t feedback_count = 0;
  // Adds `value` to word `word`; false (nothing done) when there is no such word.
  bool add_feedback(std::uint32_t word, std::uint64_t value) noexcept;

  // The thread's own UCX worker (single-thread: used by whichever std::thread runs this thread
  // id, one run at a time) and its endpoints by process. Created by the first thread_context
  // and kept across runtime::run calls: peers' process workers keep connections to it, so a
  // worker per run would leave their attachments (shm segments) behind on every run. Released
  // by the runtime at teardown (release_transport), before the UCX context.
  // Send-based messages UCX holds past their sender's deadline (declared before `worker`, so
  // that their memory goes after it).
  detail::staged_sends staged;
  std::unique_ptr<transfer::ucx_worker> worker;
  std::vector<std::unique_ptr<transfer::ucx_endpoint>> endpoints;
  // Transmitters and reply words of the thread's blocking remote atomics (remote_atomic.hpp);
  // their transmitters post on `endpoints`, so release_transport drops them first.
  detail::remote_op_state remote_ops;
  void release_transport() noexcept;

  // Who polls this thread's context: its owner (owner_polls), or, while the owner is inside a
  // helped_section, one of the process's helper threads. The owner publishes `offered` and then
  // stores offered_to_helpers (release); a helper takes it by CAS offered -> helper_polls
  // (acquire), polls once, and stores offered back (release); the owner ends the section by CAS
  // offered -> owner_polls, so owner and helper never use the context at the same time.
  static constexpr int owner_polls = 0;
  static constexpr int offered_to_helpers = 1;
  static constexpr int helper_polls = 2;
  std::atomic<int> poller{owner_polls};
  thread_context* offered = nullptr;
  // The owner hands `context` (this state's) to the helper threads and wakes them.
  void offer_to_helpers(thread_context& context) noexcept;
  // The owner takes its context back, waiting for a helper's poll in progress to end.
  void take_back_from_helpers() noexcept;

  // One-sided messages counted by the layer above (runtime::run's quiescence sums them with
  // the send-based counters). Single writer each: the owner thread (relaxed load + store).
  std::atomic<std::uint64_t> one_sided_sent{0};
  std::atomic<std::uint64_t> one_sided_consumed{0};
};

// Says on stderr (the first time in this process; all are counted by the caller) that a call
// from `source` to `self` names a function this program did not register.
void report_unknown_function(thread_context& self, std::uint32_t source,
                             function_id function) noexcept;

}  // namespace seriema::fabric
