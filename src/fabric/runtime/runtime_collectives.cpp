// The runtime's collectives (barrier, allreduce) over UCX active messages: rank 0 gathers the
// arrivals and releases the others; a deadline breaks the job's collectives, a dead rank is
// announced to every survivor. Every wait progresses the process worker.
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <seriema/base/error.hpp>
#include "runtime/runtime_internal.hpp"
#include <thread>

namespace seriema::fabric {

// The collectives' active message (am_id_runtime_barrier).
struct barrier_message {
  std::uint64_t epoch;
  std::uint32_t kind;  // 0: arrival at rank 0; 1: release from rank 0; 2: rank `value` failed
  std::int32_t from;
  std::uint64_t value;  // arrival: this rank's addend; release: the sum
};

namespace {

enum class progress_end { done, stopped, deadline };

// Progresses `worker` until done() holds, with idle back-off; ends early when stop() says so (it
// may also throw). At the deadline (read only when idle) done() is asked once more.
template <class Done, class Stop>
progress_end progress_until(transfer::ucx_worker& worker, Done done, Stop stop,
                            deadline_clock::time_point deadline) {
  int idle = 0;
  while (!done()) {
    if (stop()) return progress_end::stopped;
    if (worker.progress()) continue;
    if (deadline != no_deadline && deadline_clock::now() >= deadline) {
      return done() ? progress_end::done : progress_end::deadline;
    }
    if (++idle > 128) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));  // idle back-off
      idle = 0;
    }
  }
  return progress_end::done;
}

}  // namespace

ucs_status_t runtime::am_handlers::on_barrier_message(
    void* arg, const void* header, std::size_t header_length, void*, std::size_t,
    const ucp_am_recv_param_t*) {
  auto* self = static_cast<runtime*>(arg);
  if (header_length != sizeof(barrier_message)) return UCS_OK;  // malformed: ignore
  barrier_message message;
  std::memcpy(&message, header, sizeof message);
  if (message.kind == 2) {
    // A survivor left a collective because `value` died: so must we (it will not release us).
    if (message.value < static_cast<std::uint64_t>(self->size()) && message.from >= 0 &&
        message.from < self->size()) {
      self->note_peer_failure(static_cast<int>(message.value), UCS_ERR_CONNECTION_RESET,
                              message.from);
    }
    return UCS_OK;
  }
  if (message.kind == 0) {
    // Sum before count: the waiter reads the count (acquire), then the sum.
    if (message.from <= 0 || message.from >= self->size()) return UCS_OK;  // malformed
    self->barrier_sums_[message.epoch % 2].fetch_add(message.value, std::memory_order_relaxed);
    self->barrier_arrived_[static_cast<std::size_t>(message.from)].store(
        message.epoch + 1, std::memory_order_release);
    self->barrier_arrivals_[message.epoch % 2].fetch_add(1, std::memory_order_release);
  } else {
    self->barrier_result_.store(message.value, std::memory_order_relaxed);
    std::uint64_t released = self->barrier_released_.load(std::memory_order_relaxed);
    while (released < message.epoch + 1 &&
           !self->barrier_released_.compare_exchange_weak(released, message.epoch + 1,
                                                          std::memory_order_release)) {
    }
  }
  return UCS_OK;
}

void runtime::send_barrier_message(int to, const barrier_message& message,
                                   deadline_clock::time_point deadline, const char* what) {
  transfer::ucx_endpoint& peer = endpoint(to);
  auto wait = [&](void* request) {
    auto sent = [request] { return ucp_request_check_status(request) != UCS_INPROGRESS; };
    auto dead = [&] { return peer_failed(to); };
    switch (progress_until(*worker_, sent, dead, deadline)) {
      case progress_end::done: return detail::staged_sends::wait_end::completed;
      case progress_end::stopped: return detail::staged_sends::wait_end::peer_dead;
      case progress_end::deadline: return detail::staged_sends::wait_end::deadline;
    }
    return detail::staged_sends::wait_end::deadline;
  };
  using result = detail::staged_sends::result;
  const result sent = barrier_staged_.send(
      peer.handle(), to, am_id_runtime_barrier,
      {reinterpret_cast<const std::byte*>(&message), sizeof message}, {}, {}, wait);
  if (sent == result::sent) return;
  if (sent == result::deadline_unsent || sent == result::queued_at_deadline) {
    break_collectives(fmt::format("{} on rank {}: deadline passed before rank {} could be told "
                                  "(stalled or partitioned)",
                                  what, rank(), to));
  }
  throw error(fmt::format("{} on rank {}: cannot reach rank {}: {}", what, rank(), to,
                          sent == result::peer_failed ? "it failed" : "UCX refused the send"));
}

void runtime::barrier(deadline_clock::time_point deadline) {
  (void)collective_sum(0, deadline, "barrier");
}

std::uint64_t runtime::allreduce_sum(std::uint64_t value, deadline_clock::time_point deadline) {
  return collective_sum(value, deadline, "allreduce");
}

deadline_clock::time_point runtime::default_deadline() const noexcept {
  if (options_.timeout.count() <= 0) return no_deadline;
  return deadline_clock::now() + options_.timeout;
}

void runtime::break_collectives(const std::string& text) {
  collectives_broken_ = text;
  throw deadline_error(text);
}

std::string runtime::ranks_missing_from(std::uint64_t epoch) const {
  std::string missing;
  for (int r = 1; r < size(); ++r) {
    if (barrier_arrived_[static_cast<std::size_t>(r)].load(std::memory_order_acquire) > epoch) {
      continue;
    }
    missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
  }
  return missing.empty() ? "none (the last arrival came as the deadline passed)" : missing;
}

void runtime::throw_if_peers_failed(const char* what) {
  // Every survivor leaves the collective, not only the ones whose own peer died: rank 0 would
  // never release the others. So the survivors learn it too, whether or not they talked to
  // the dead rank: each dead rank is announced to every live one (once; best effort).
  if (failure_epoch() == 0) return;
  for (int dead = 0; dead < size(); ++dead) {
    if (!peer_failed(dead) || failures_announced_[static_cast<std::size_t>(dead)]) continue;
    failures_announced_[static_cast<std::size_t>(dead)] = true;
    for (int r = 0; r < size(); ++r) {
      if (r == rank() || peer_failed(r)) continue;
      try {
        send_barrier_message(r, {0, 2, rank(), static_cast<std::uint64_t>(dead)},
                             deadline_clock::now() + std::chrono::seconds(1), "failure notice");
      } catch (const std::exception&) {
        // That one is failing too: its own detection, or another survivor, covers it.
      }
    }
  }
  throw error(fmt::format("{} on rank {}: {} failed; the job cannot complete it", what, rank(),
                          describe_failed_peers()));
}

std::uint64_t runtime::collective_sum(std::uint64_t value, deadline_clock::time_point deadline,
                                      const char* what, thread_context* serving) {
  if (!collectives_broken_.empty()) {
    throw deadline_error(fmt::format(
        "{} on rank {}: refused, an earlier collective of this job passed its deadline, so the "
        "ranks no longer agree on collectives: {}",
        what, rank(), collectives_broken_));
  }
  if (size() == 1) return value;
  // A rank known dead can join no collective: fail before sending anything (an arrival sent to a
  // survivor that already left would fail on its own, naming the wrong rank).
  throw_if_peers_failed(what);
  const std::uint64_t epoch = barrier_epoch_++;
  const auto started = deadline_clock::now();
  auto waited = [&] {
    return std::chrono::duration<double>(deadline_clock::now() - started).count();
  };
  // Serving: calls run here may batch onward calls (trad) that a worker not in this collective
  // waits for; they are published once the thread is idle again, as wait_until does. Also at
  // the first idle poll: the caller may have served calls just before (quiesce's leader does,
  // until idle, and then waits here for the other ranks, which may wait for those calls).
  bool ran_since_flush = true;
  auto check_peers = [&] {
    if (serving != nullptr) {
      if (serving->poll() != 0) {
        ran_since_flush = true;
      } else if (ran_since_flush) {
        serving->flush_layers();
        ran_since_flush = false;
      }
    }
    throw_if_peers_failed(what);
    return false;
  };
  if (rank() == 0) {
    auto& arrivals = barrier_arrivals_[epoch % 2];
    auto all_arrived = [&] {
      return arrivals.load(std::memory_order_acquire) >= static_cast<std::uint64_t>(size() - 1);
    };
    if (progress_until(*worker_, all_arrived, check_peers, deadline) != progress_end::done) {
      break_collectives(fmt::format(
          "{} #{} on rank 0: deadline passed after {:.3f} s with rank(s) {} not arrived (stalled, "
          "partitioned, or not calling it)",
          what, epoch, waited(), ranks_missing_from(epoch)));
    }
    std::uint64_t total = value + barrier_sums_[epoch % 2].exchange(0, std::memory_order_relaxed);
    arrivals.store(0, std::memory_order_relaxed);
    for (int r = 1; r < size(); ++r) send_barrier_message(r, {epoch, 1, 0, total}, deadline, what);
    return total;
  }
  send_barrier_message(0, {epoch, 0, rank(), value}, deadline, what);
  auto released = [&] { return barrier_released_.load(std::memory_order_acquire) > epoch; };
  if (progress_until(*worker_, released, check_peers, deadline) != progress_end::done) {
    break_collectives(fmt::format(
        "{} #{} on rank {}: deadline passed after {:.3f} s without rank 0 releasing it (rank 0, "
        "or a rank it waits for, is stalled, partitioned, or not calling it; rank 0's error "
        "names the missing ranks)",
        what, epoch, rank(), waited()));
  }
  return barrier_result_.load(std::memory_order_relaxed);
}

}  // namespace seriema::fabric
