// distributed_search, the threads' loop: serve calls, simulate, start rollouts (root process
// only) within the in-flight window; the end of the search, and its abort on a failure.
#pragma once

#include <seriema/mcts/distributed.hpp>

namespace seriema::mcts {

template <game G>
inline void distributed_search<G>::thread_main(fabric::thread_context& me) {
  const int local_index = rt_.placement().locate(me.id()).local_thread;
  worker& w = *workers_[static_cast<std::size_t>(local_index)];
  const bool starts_rollouts = rt_.rank() == 0 && !carrying_;
  const bool reports = starts_rollouts && local_index == 0 && progress_ && *progress_;
  auto last_report = std::chrono::steady_clock::now();
  unsigned idle = 0;
  if (carrying_ && rt_.rank() == 0 && local_index == 0) {
    guarded(me, [&] { descend(me, w, carry_from_, 0); });
  }
  // An abort anywhere in the process ends every loop (its steps are dropped from then on).
  while (!w.finished.load(std::memory_order_acquire) &&
         !aborted_.load(std::memory_order_acquire)) {
    std::size_t work = 0;
    guarded(me, [&] {
      work += me.poll();
      node* leaf = nullptr;
      if (w.simulations.try_dequeue(leaf)) {
        simulate(me, w, leaf);
        ++work;
      }
      if (starts_rollouts) work += start_rollouts(me, w);
    });
    if (options_.channel == invoke::channel::trad) {
      me.flush_layers();
    }
    if (reports) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_report > std::chrono::milliseconds(100)) {
        last_report = now;
        guarded(me, [&] {
          (*progress_)(completed_rollouts(),
                       std::chrono::duration<double>(now - start_).count());
        });
      }
    }
    if (work == 0) {
      fabric::thread_context::back_off(idle);
    } else {
      idle = 0;
    }
  }
}

/// Starts a batch of rollouts while the budget and this thread's share of the in-flight
/// window allow. Root process only.
template <game G>
inline std::size_t distributed_search<G>::start_rollouts(fabric::thread_context& me, worker& w) {
  const std::int64_t in_flight_here = static_cast<std::int64_t>(w.started_here) -
      static_cast<std::int64_t>(w.completed_here.load(std::memory_order_relaxed));
  const std::int64_t credit = w.window_share - in_flight_here;
  if (credit < w.start_batch) return 0;  // a full share is the common case
  std::uint64_t s = started_.load();
  std::uint64_t batch = 0;
  // The solver's proof ends the search, after one rollout at least: a root proven before the
  // search (a kept one, reuse_tree) may have no edge with visits yet, and the result names
  // its most visited move.
  const bool decided = root_decided();
  if (decided && (s & ~stop_bit) > 0) {
    if ((s & stop_bit) == 0) stop(me);
    return 0;
  }
  for (;;) {
    if ((s & stop_bit) != 0) return 0;
    if (s >= budget_) {
      stop(me);
      return 0;
    }
    // The clock and the stop flag only when rollouts would start. At least one rollout,
    // however short the time: the result names a move.
    const bool stopped = stop_ != nullptr && stop_->load(std::memory_order_relaxed);
    if (s > 0 && (stopped || (has_deadline_ && std::chrono::steady_clock::now() >= deadline_))) {
      stop(me);
      return 0;
    }
    // A thread that completed others' rollouts may have more credit than its share; it
    // starts at most a share (or 4) at a time and polls in between.
    const auto share = static_cast<std::uint64_t>(std::max<std::int64_t>(4, w.window_share));
    batch = decided ? 1
                    : std::min<std::uint64_t>(
                          {static_cast<std::uint64_t>(credit), budget_ - s, share});
    if (started_.compare_exchange_weak(s, s + batch)) break;
  }
  w.started_here += batch;
  for (std::uint64_t i = 0; i < batch; ++i) {
    if (steps_directly(me, root_->owner)) {
      select(me, w, root_);
    } else {
      send_select(me, w, root_->owner, address_of(root_));
    }
  }
  return static_cast<std::size_t>(batch);
}

/// Who wins the root by the solver's proof (root process; nobody while unproven).
template <game G>
inline player distributed_search<G>::root_winner() const noexcept {
  const table* t = root_->edges.load(std::memory_order_acquire);
  return t != nullptr ? t->decided.load(std::memory_order_acquire) : nobody;
}

template <game G>
inline bool distributed_search<G>::root_decided() const noexcept {
  return solver_ && root_winner() != nobody;
}

/// Rollouts back at the root so far (root process).
template <game G>
inline std::uint64_t distributed_search<G>::completed_rollouts() const noexcept {
  std::uint64_t sum = 0;
  for (const auto& w : workers_) sum += w->completed_here.load();
  return sum;
}

/// No rollout starts after this. The last one to complete (or this, if none is in flight)
/// ends the search. started_ and the completed_here words are sequentially consistent: in
/// their single total order, either stop()'s fetch_or precedes the last completion's
/// increment, and that completion's loads see the stop bit and every completion, or it
/// follows it, and stop()'s sum sees every completion. finish() runs once either way.
template <game G>
inline void distributed_search<G>::stop(fabric::thread_context& me) {
  const std::uint64_t s = started_.fetch_or(stop_bit) & ~stop_bit;
  if (completed_rollouts() == s) finish(me);
}

template <game G>
inline void distributed_search<G>::complete_rollout(fabric::thread_context& me) {
  worker_of(me).completed_here.fetch_add(1);
  const std::uint64_t s = started_.load();
  if ((s & stop_bit) != 0 && completed_rollouts() == (s & ~stop_bit)) finish(me);
}

/// Every rollout has come back to the root: every thread of the job leaves its loop.
template <game G>
inline void distributed_search<G>::finish(fabric::thread_context& me) {
  if (finish_sent_.exchange(true)) return;
  worker& self = worker_of(me);
  for (fabric::thread_id t = 0; t < thread_count_; ++t) {
    if (rt_.is_local(t)) {
      workers_[local_index(t)]->finished.store(true, std::memory_order_release);
    } else {
      ++self.remote_calls;
      check(me, invoke::channel::send, t,
            me.call(t, [](fabric::thread_context& target) {  // send-based: never full
              active_->worker_of(target).finished.store(true, std::memory_order_release);
            }));
    }
  }
}

/// Runs a step; an exception (a call that could not be sent, memory exhausted, a throwing game
/// or progress callback) aborts the search instead of leaving the thread: a lost rollout
/// would never complete, and the job would wait for it forever. Steps arriving after the
/// abort are dropped, so the job quiets down and every rank reports the failure.
template <game G>
template <class Step>
inline void distributed_search<G>::guarded(fabric::thread_context& me, Step&& step) noexcept {
  if (aborted_.load(std::memory_order_acquire)) return;
  try {
    step();
  } catch (const std::exception& e) {
    abort_search(me, e.what());
  } catch (...) {
    abort_search(me, "an exception that is not a std::exception");
  }
}

template <game G>
inline void distributed_search<G>::abort_search(fabric::thread_context& me,
                                                const std::string& what) noexcept {
  {
    std::lock_guard lock(failure_mutex_);
    if (failure_.empty()) {
      failure_ = fmt::format("the search failed on rank {}, thread {}: {}", rt_.rank(),
                             me.id(), what);
    }
  }
  if (aborted_.exchange(true, std::memory_order_acq_rel)) return;
  // Every thread of the job leaves its loop and drops what still arrives.
  for (fabric::thread_id t = 0; t < thread_count_; ++t) {
    if (rt_.is_local(t)) {
      workers_[local_index(t)]->finished.store(true, std::memory_order_release);
      continue;
    }
    // Send-based: it needs no room in a ring that may be what failed. A peer that cannot be
    // told fails in the runtime's own termination rounds.
    try {
      (void)me.call(t, [](fabric::thread_context& target) {
        active_->aborted_.store(true, std::memory_order_release);
        active_->worker_of(target).finished.store(true, std::memory_order_release);
      });
    } catch (...) {
    }
  }
}

}  // namespace seriema::mcts
