// thread_context::quiesce: the job-wide quiescence barrier of run()'s workers. Each process's
// last worker to arrive runs the termination rounds runtime::run has at its end (every thread
// flushes, then the job sums what it sent and consumed, until two rounds agree and nothing is in
// flight), while the others serve calls and flush when asked.
#include <fmt/format.h>

#include <chrono>
#include <seriema/base/error.hpp>
#include <seriema/fabric/runtime.hpp>
#include <string>

#include "runtime/runtime_internal.hpp"

namespace seriema::fabric {

namespace {

// Marks the thread as inside quiesce() while it lives: a call or a coroutine that the thread runs
// while it waits there must not start another one (its process would count one arrival twice).
class inside_quiesce {
 public:
  explicit inside_quiesce(thread_id id) {
    if (inside_) {
      throw error(fmt::format("quiesce on thread {}: called again while the thread waits in "
                              "quiesce (from a call or a coroutine it ran meanwhile)",
                              id));
    }
    inside_ = true;
  }
  ~inside_quiesce() { inside_ = false; }
  inside_quiesce(const inside_quiesce&) = delete;
  inside_quiesce& operator=(const inside_quiesce&) = delete;

 private:
  static thread_local bool inside_;
};
thread_local bool inside_quiesce::inside_ = false;

// Polls `self` until it ran nothing (or the deadline passed): what was sent to the thread runs.
void serve_until_idle(thread_context& self, deadline_clock::time_point deadline) {
  while (self.poll() != 0) {
    if (deadline != no_deadline && deadline_clock::now() >= deadline) return;
  }
}

double seconds_since(deadline_clock::time_point start) {
  return std::chrono::duration<double>(deadline_clock::now() - start).count();
}

}  // namespace

void thread_context::quiesce(deadline_clock::time_point deadline) { rt_.quiesce(*this, deadline); }

void runtime::quiesce(thread_context& self, deadline_clock::time_point deadline) {
  if (running_runs_.load(std::memory_order_acquire) == 0 || (self.id() & service_bit) != 0 ||
      is_attached_id(self.id()) || !is_local(self.id())) {
    throw error(fmt::format("quiesce on thread {}: only run()'s workers call it, inside run(), "
                            "every one of them",
                            self.id() & ~service_bit));
  }
  inside_quiesce guard(self.id());
  quiescence& q = *quiescence_;
  if (q.broken.load(std::memory_order_acquire)) {
    std::lock_guard lock(q.failure_mutex);
    throw error(q.failure);
  }
  deadline = self.deadline_in_force(deadline);
  // Exceptions of calls run meanwhile are kept for the thread's next outer poll: leaving here
  // early would leave this process's count of arrivals wrong.
  thread_context::deferring_scope keep(self);
  const std::uint64_t generation = q.generation.load(std::memory_order_acquire);
  // Read before arriving: the leader bumps the round only after the last worker arrived, so
  // this value precedes its first round. A follower that read it after arriving could read the
  // bumped value (preempted between the two), never see a round start, never answer it, and
  // leave the leader waiting for its answer.
  const std::uint64_t round_before = q.flush_round.load(std::memory_order_acquire);
  if (q.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == options_.threads_per_process) {
    lead_quiescence(self, q, deadline);
  } else {
    follow_quiescence(self, q, generation, round_before, deadline);
  }
}

void runtime::lead_quiescence(thread_context& self, quiescence& q,
                              deadline_clock::time_point deadline) {
  const char* what = "quiesce";
  const auto started = deadline_clock::now();
  const int others = options_.threads_per_process - 1;
  try {
    std::uint64_t last_sent = ~std::uint64_t{0};
    for (;;) {
      q.flushed.store(0, std::memory_order_relaxed);
      q.flush_round.fetch_add(1, std::memory_order_release);
      {
        thread_context::deadline_scope bounded(self, deadline);
        self.flush_endpoints();
      }
      serve_until_idle(self, deadline);
      if (!self.wait_until([&] { return q.flushed.load(std::memory_order_acquire) >= others; },
                           deadline)) {
        throw deadline_error(fmt::format(
            "{} on rank {}: deadline passed after {:.3f} s while this process's workers flushed "
            "what they sent",
            what, rank(), seconds_since(started)));
      }
      // Serving meanwhile: a worker elsewhere that has not reached quiesce yet may be waiting
      // for the reply of a call it sent to this one.
      const std::uint64_t sent = collective_sum(messages_sent(), deadline, what, &self);
      const std::uint64_t consumed = collective_sum(messages_consumed(), deadline, what, &self);
      if (sent == consumed && sent == last_sent) break;
      last_sent = sent;
    }
  } catch (const std::exception& e) {
    {
      std::lock_guard lock(q.failure_mutex);
      q.failure = e.what();
    }
    q.broken.store(true, std::memory_order_release);
    q.arrived.store(0, std::memory_order_relaxed);
    q.generation.fetch_add(1, std::memory_order_release);
    throw;
  }
  q.arrived.store(0, std::memory_order_relaxed);
  q.generation.fetch_add(1, std::memory_order_release);
}

void runtime::follow_quiescence(thread_context& self, quiescence& q, std::uint64_t generation,
                                std::uint64_t seen_round, deadline_clock::time_point deadline) {
  const auto started = deadline_clock::now();
  unsigned idle = 0;
  while (q.generation.load(std::memory_order_acquire) == generation) {
    const std::size_t ran = self.poll();
    const std::uint64_t round = q.flush_round.load(std::memory_order_acquire);
    if (round != seen_round) {
      thread_context::deadline_scope bounded(self, deadline);
      self.flush_endpoints();
      seen_round = round;
      q.flushed.fetch_add(1, std::memory_order_acq_rel);
      continue;
    }
    if (ran != 0) {
      idle = 0;
      continue;
    }
    // Idle: publish what the calls run here batched (trad), as wait_until does. A worker that
    // has not arrived may wait for one of them (a deferred reply's onward call), and no leader
    // round, which would flush it, starts before that worker arrives.
    if (idle == 0) self.flush_layers();
    if (deadline != no_deadline && deadline_clock::now() >= deadline) {
      const std::string why = fmt::format(
          "quiesce on rank {}, thread {}: deadline passed after {:.3f} s waiting for this "
          "process's other workers or the job's rounds",
          rank(), self.id(), seconds_since(started));
      {
        std::lock_guard lock(q.failure_mutex);
        q.failure = why;
      }
      q.broken.store(true, std::memory_order_release);
      throw deadline_error(why);
    }
    thread_context::back_off(idle);
  }
  if (q.broken.load(std::memory_order_acquire)) {
    std::lock_guard lock(q.failure_mutex);
    throw error(q.failure);
  }
}

}  // namespace seriema::fabric
