// runtime::run: the worker, service and helper threads of one run, and the coordinator that
// ends the run once the whole job is quiet (every call sent has been executed or rejected), or
// at the run's deadline.
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <fmt/format.h>

#include <mutex>
#include <seriema/base/error.hpp>
#include "runtime/runtime_internal.hpp"
#include <string>
#include <thread>
#include <vector>

#include "runtime/counters_report.hpp"

namespace seriema::fabric {

// The state of one run, shared by its threads. Owner: runtime::run, on the calling thread.
// Who writes what: worker threads count bodies_done and flushed and write their counter entry;
// the coordinator (the calling thread) writes flush_round and finished; any thread may record
// the first error (under error_mutex). `deadline` bounds everything the run waits for after the
// bodies: the flushes, the termination rounds and the exit barrier.
class runtime::run_loop {
 public:
  run_loop(runtime& rt, const std::function<void(thread_context&)>& body,
           deadline_clock::time_point deadline)
      : rt_(rt),
        body_(body),
        deadline_(deadline),
        threads_(rt.options_.threads_per_process),
        participants_(threads_ + rt.options_.service_threads),
        counter_entries_(rt.counters_file_.empty() ? 0 : static_cast<std::size_t>(threads_)) {}

  // Starts the helper threads, one thread per worker and the service thread if there is one.
  void start() {
    for (int h = 0; h < rt_.options_.helper_threads; ++h) {
      pool_.emplace_back([this] { helper_main(); });
    }
    for (int t = 0; t < threads_; ++t) {
      pool_.emplace_back([this, t] {
        thread_main(rt_.placement_->global_id(rt_.rank(), t), false, static_cast<std::size_t>(t));
      });
    }
    if (rt_.options_.service_threads > 0) {
      pool_.emplace_back([this] { thread_main(0, true, 0); });
    }
  }

  // On the calling thread: waits for the local bodies, then runs termination rounds; returns
  // whether every rank completed them (so that all reach the exit barrier).
  bool coordinate() {
    try {
      wait_for_bodies();
      run_termination_rounds();
      return true;
    } catch (...) {
      record_error();
      return false;
    }
  }

  // Ends the run: stops and joins every thread, passes the exit barrier, writes the counters,
  // and rethrows the first error any thread met.
  void finish(bool quiet) {
    finished_.store(true, std::memory_order_release);
    rt_.wake_helpers();
    for (auto& t : pool_) t.join();
    // Exit barrier: the allreduce's root returns as soon as it sent the release, and could start
    // the next run and send calls that the other ranks' threads, still serving this run, would
    // run in it. After the barrier every rank has joined its threads: a call of the next run
    // waits in its destination's queue (or memory map) for the next run's threads.
    if (quiet) {
      try {
        (void)rt_.collective_sum(0, deadline_, "run()'s exit barrier");
      } catch (...) {
        record_error();
      }
    }
    if (!rt_.counters_file_.empty()) {
      try {
        detail::write_counters_file(rt_.counters_file_, rt_, rt_.run_epoch_.load(),
                                    counter_entries_);
      } catch (...) {
        record_error();
      }
    }
    if (first_error_) std::rethrow_exception(first_error_);
  }

 private:
  void record_error() {
    std::lock_guard lock(error_mutex_);
    if (!first_error_) first_error_ = std::current_exception();
  }

  // Bumped (and notified) when a body ends or a thread fails: the coordinator sleeps on it for
  // the whole body phase instead of waking every 200 us, which took a core's time slices from
  // the workers of a process with as many threads as cores.
  void wake_coordinator() {
    coordinator_signal_.fetch_add(1, std::memory_order_acq_rel);
    coordinator_signal_.notify_one();
  }

  void thread_main(thread_id id, bool is_service, std::size_t local) {
    try {
      if (!is_service) rt_.placement_->pin_thread(id);
      thread_context ctx(rt_, is_service ? service_of(rt_.rank()) : id);
      if (!is_service) {
        try {
          body_(ctx);
        } catch (...) {
          record_error();
        }
        bodies_done_.fetch_add(1, std::memory_order_acq_rel);
        wake_coordinator();
      }
      serve_until_finished(ctx, is_service);
      if (!is_service && !counter_entries_.empty()) {
        counter_entries_[local] = detail::thread_counters_json(ctx);
      }
    } catch (...) {
      record_error();
      bodies_done_.fetch_add(is_service ? 0 : 1);
      finished_.store(true);
      wake_coordinator();
      rt_.wake_helpers();
    }
  }

  // Keeps serving calls until the whole job is quiet; flushes on request so the coordinator's
  // counts include everything this thread sent, and whenever idle so that calls the handlers
  // run here batched (trad) are published. A call that throws now is kept for run() to
  // rethrow, and serving goes on: a thread that stopped would hang the job.
  void serve_until_finished(thread_context& ctx, bool is_service) {
    std::uint64_t seen_round = 0;
    unsigned idle = 0;
    while (!finished_.load(std::memory_order_acquire)) {
      std::size_t ran = 0;
      try {
        ran = is_service ? rt_.serve(ctx) + ctx.poll() : ctx.poll();
        if (ran == 0 && idle == 0) ctx.flush_layers();
      } catch (...) {
        record_error();
        ran = 1;
      }
      const std::uint64_t round = flush_round_.load(std::memory_order_acquire);
      if (round != seen_round) {
        thread_context::deadline_scope by_the_run(ctx, deadline_);
        ctx.flush_endpoints();
        seen_round = round;
        flushed_.fetch_add(1, std::memory_order_acq_rel);
      }
      if (ran == 0) thread_context::back_off(idle);
      else idle = 0;
    }
  }

  // Helper threads: poll the contexts their owners offered (helped_section) until the run ends.
  // With no context offered they sleep on helper_signal_ (bumped by every helped_section and at
  // the end of the run) instead of polling: a busy process keeps its cores for its workers.
  void helper_main() {
    unsigned idle = 0;
    while (!finished_.load(std::memory_order_acquire)) {
      const std::uint32_t signal = rt_.helper_signal_.load(std::memory_order_acquire);
      bool any_offered = false;
      const std::size_t ran = poll_offered_contexts(any_offered);
      if (!any_offered && !finished_.load(std::memory_order_acquire)) {
        // A section opened after the scan, or the run's end, changed the signal: no lost wakeup.
        rt_.helper_signal_.wait(signal, std::memory_order_acquire);
        idle = 0;
        continue;
      }
      if (ran == 0) thread_context::back_off(idle);
      else idle = 0;
    }
  }

  // One pass over the process's threads: polls each context offered to helpers that no other
  // helper holds (the poller word goes offered -> helper_polls -> offered). Returns the calls run.
  std::size_t poll_offered_contexts(bool& any_offered) {
    std::size_t ran = 0;
    for (auto& state : rt_.local_states_) {
      if (state->poller.load(std::memory_order_relaxed) != local_thread_state::offered_to_helpers) {
        continue;
      }
      any_offered = true;
      int expected = local_thread_state::offered_to_helpers;
      if (!state->poller.compare_exchange_strong(expected, local_thread_state::helper_polls,
                                                 std::memory_order_acquire)) {
        continue;
      }
      try {
        ran += state->offered->poll();
      } catch (...) {
        record_error();
      }
      state->poller.store(local_thread_state::offered_to_helpers, std::memory_order_release);
    }
    return ran;
  }

  void wait_for_bodies() {
    for (;;) {
      const std::uint32_t signal = coordinator_signal_.load(std::memory_order_acquire);
      if (bodies_done_.load(std::memory_order_acquire) >= threads_ || finished_.load()) return;
      coordinator_signal_.wait(signal, std::memory_order_acquire);
    }
  }

  // Termination rounds: every thread flushes (its sends are delivered), then the job sums sent
  // and executed counts; the job is quiet when two consecutive rounds agree and sent == executed.
  // Bounded by the run's deadline only, never by SERIEMA_TIMEOUT: other ranks' bodies may
  // legitimately run for long. A rank that fails ends them (the collectives throw naming it).
  void run_termination_rounds() {
    const char* what = "run()'s termination round";
    const auto started = deadline_clock::now();
    if (deadline_ != no_deadline && started >= deadline_) {
      // The others meet in rounds this rank never enters: its collectives are broken.
      rt_.break_collectives(fmt::format(
          "{} on rank {}: deadline passed {:.3f} s before this process's bodies returned", what,
          rt_.rank(), std::chrono::duration<double>(started - deadline_).count()));
    }
    std::uint64_t last_sent = ~std::uint64_t{0};
    for (std::uint64_t round = 1;; ++round) {
      flushed_.store(0, std::memory_order_relaxed);
      flush_round_.store(round, std::memory_order_release);
      while (flushed_.load(std::memory_order_acquire) < participants_ && !finished_.load()) {
        if (deadline_ != no_deadline && deadline_clock::now() >= deadline_) {
          rt_.break_collectives(fmt::format(
              "{} on rank {}: deadline passed after {:.3f} s while this process's threads "
              "flushed what they sent (a peer stalled or partitioned?)",
              what, rt_.rank(),
              std::chrono::duration<double>(deadline_clock::now() - started).count()));
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      const std::uint64_t sent = rt_.collective_sum(rt_.messages_sent(), deadline_, what);
      // Every message sent is eventually executed or rejected (counted either way).
      const std::uint64_t executed = rt_.collective_sum(rt_.messages_consumed(), deadline_, what);
      if (sent == executed && sent == last_sent) return;
      last_sent = sent;
    }
  }

  runtime& rt_;
  const std::function<void(thread_context&)>& body_;
  const deadline_clock::time_point deadline_;
  const int threads_;
  const int participants_;  // threads that answer flush rounds: workers and the service thread
  std::atomic<int> bodies_done_{0};
  std::atomic<std::uint64_t> flush_round_{0};  // coordinator -> threads: flush your endpoints
  std::atomic<int> flushed_{0};                // threads -> coordinator
  std::atomic<bool> finished_{false};
  std::atomic<std::uint32_t> coordinator_signal_{0};
  std::mutex error_mutex_;
  std::exception_ptr first_error_;
  // SERIEMA_COUNTERS: each worker writes its entry (slot = local index) as it leaves.
  std::vector<std::string> counter_entries_;
  std::vector<std::thread> pool_;
};

void runtime::run(const std::function<void(thread_context&)>& body,
                  deadline_clock::time_point deadline) {
  running_runs_.fetch_add(1, std::memory_order_acq_rel);
  struct leave_run {
    std::atomic<int>& runs;
    ~leave_run() { runs.fetch_sub(1, std::memory_order_acq_rel); }
  } leaving{running_runs_};
  run_epoch_.fetch_add(1, std::memory_order_acq_rel);
  run_loop loop(*this, body, deadline);
  loop.start();
  const bool quiet = loop.coordinate();
  loop.finish(quiet);
}

}  // namespace seriema::fabric
