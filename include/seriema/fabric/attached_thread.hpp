// A thread that is not one of runtime::run's workers (a pool thread, main, a short-lived
// std::thread) holding one of its process's attach slots: a job-wide thread id and a context
// that makes send-based calls and waits for replies, without setup, inside or outside run().
#pragma once

#include <seriema/fabric/placement.hpp>

namespace seriema::fabric {

class runtime;
class thread_context;

/// The handle runtime::attach() returns: while it lives, the thread that attached owns one of
/// the process's SERIEMA_ATTACH_SLOTS contexts, whose id (after every worker's, see
/// runtime::attached_id) is a valid destination of send-based calls from anywhere in the job.
/// Its context calls any thread with thread_context::call, call_buffer and call_return, serves
/// the calls sent to it whenever it polls or waits, and takes the service role like a worker.
///
/// Limits (docs/attach.md): attached contexts are the paper's short-lived threads, so they use
/// the send-based path only. The invoke layer's one-sided channels, synchronizers and
/// broadcasts need a worker context (they throw seriema::error naming this); one-sided calls and
/// calls with a synchronizer addressed to an attached id return call_status::bad_destination.
/// Calls that reach a slot while nobody holds it are run by the process's helper threads
/// during run(), else by the next thread that attaches it. Cost: the first attach of a slot
/// creates its UCX worker (about a millisecond); later ones take the slot with a few atomic
/// operations.
///
/// Thread-safety: the attaching thread only (owner thread of the context). Destroying it
/// detaches: the slot goes back to the process, exceptions its polls kept and never threw are
/// logged and dropped, and return_slots still open belong to the application (end them first).
class attached_thread {
 public:
  attached_thread(attached_thread&& other) noexcept;  ///< Takes over other's slot.
  attached_thread& operator=(attached_thread&&) = delete;
  attached_thread(const attached_thread&) = delete;
  attached_thread& operator=(const attached_thread&) = delete;
  ~attached_thread();  ///< Detaches (see the class comment).

  /// The context to call and wait with (owner thread only).
  [[nodiscard]] thread_context& context() const noexcept { return *context_; }
  /// The job-wide id calls to this thread name.
  [[nodiscard]] thread_id id() const noexcept;
  /// The slot held (0..SERIEMA_ATTACH_SLOTS - 1).
  [[nodiscard]] int slot() const noexcept { return slot_; }

 private:
  friend class runtime;
  attached_thread(runtime& rt, int slot, thread_context& context) noexcept
      : rt_(&rt), slot_(slot), context_(&context) {}
  runtime* rt_;
  int slot_;
  thread_context* context_;
};

}  // namespace seriema::fabric
