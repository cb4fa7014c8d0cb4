// containers::array: a fixed-size array of T partitioned over the worker threads of the job (a
// block or cyclic distribution of indexes), updated by aggregated one-sided calls.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <seriema/base/error.hpp>
#include <seriema/containers/detail/ask_every_worker.hpp>
#include <seriema/containers/detail/container_table.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/invoke.hpp>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace seriema::containers {

using fabric::thread_context;
using fabric::thread_id;
using invoke::call_status;

/// How an array's indexes are spread over the workers.
enum class distribution : std::uint8_t {
  block,   ///< worker t owns one run of consecutive indexes (the first size % workers one more)
  cyclic,  ///< index i belongs to worker i % workers
};

/// An array of `size` values of T (value-initialized), whose elements live at their owner
/// threads, made by every worker in the same order as its other containers (collective). set,
/// add and visit are one-sided calls through channel C to the owner, applied there in the order
/// each sender made them; get answers with a future; gather collects the whole array in index
/// order; barrier() (the job's quiesce) orders everything. Values of any type cereal serializes
/// (trivially copyable ones travel in the call's closure). An index past the end throws
/// seriema::error at the caller. Failures as map's: an update to a dead owner returns
/// peer_failed, a get's future fails, barrier() throws. Owner thread only.
template <class T, invoke::channel C = invoke::channel::adaptive, class Policy = invoke::policy::retry>
class array {
 public:
  using value_type = T;  ///< the elements

  /// Makes this worker's elements and waits until every worker made its own (a job-wide
  /// quiesce, by `deadline` at the latest).
  array(thread_context& self, std::uint64_t size, distribution how = distribution::block,
        fabric::deadline_clock::time_point deadline = fabric::no_deadline)
      : self_(self), size_(size), how_(how), workers_(self.thread_count()),
        local_(static_cast<std::size_t>(count_of(self.id()))),
        registration_(self, this, deadline) {}
  /// Leaves the job's array: operations that reach this part later are dropped and counted
  /// (call barrier() first when updates may still be on their way).
  ~array() = default;
  array(const array&) = delete;
  array& operator=(const array&) = delete;

  /// What containers::post and ask (any_thread.hpp) name this object by.
  [[nodiscard]] detail::part_key part_key() const noexcept {
    return {registration_.id(), this, self_.id()};
  }
  /// The worker that made this object (the only one that uses it).
  [[nodiscard]] thread_context& self() const noexcept { return self_; }
  /// Elements in the whole array.
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  /// The worker that owns index i.
  [[nodiscard]] thread_id owner(std::uint64_t i) const noexcept {
    if (how_ == distribution::cyclic) return static_cast<thread_id>(i % workers_);
    const std::uint64_t base = size_ / workers_, extra = size_ % workers_;
    const std::uint64_t in_long = extra * (base + 1);  // indexes of the longer blocks
    if (i < in_long) return static_cast<thread_id>(i / (base + 1));
    return static_cast<thread_id>(extra + (i - in_long) / base);
  }
  /// The first index worker t owns.
  [[nodiscard]] std::uint64_t first_of(thread_id t) const noexcept {
    if (how_ == distribution::cyclic) return t;
    const std::uint64_t base = size_ / workers_, extra = size_ % workers_;
    return t * base + std::min<std::uint64_t>(t, extra);
  }
  /// How many indexes worker t owns.
  [[nodiscard]] std::uint64_t count_of(thread_id t) const noexcept {
    return size_ / workers_ + (t < size_ % workers_ ? 1 : 0);  // either distribution
  }

  /// a[i] = value.
  call_status set(std::uint64_t i, const T& value) {
    return run_at(i, [](T& element, const T& v) { element = v; }, value);
  }
  /// a[i] = a[i] + value (any T with +).
  call_status add(std::uint64_t i, const T& value) {
    return run_at(i, [](T& element, const T& v) { element = element + v; }, value);
  }
  /// Runs f(i, a[i], args...) at the owner (a T&; the arguments travel as values).
  template <class F, class... Args>
  call_status visit(std::uint64_t i, F f, const Args&... args) {
    return run_at(
        i,
        [f, i](T& element, const Args&... a) {
          std::tuple<Args...> copies(a...);
          std::apply([&](Args&... own) { f(i, element, own...); }, copies);
        },
        args...);
  }
  /// a[i] at its owner when the future ends, after every update this thread sent there before.
  invoke::future<T> get(std::uint64_t i) {
    check(i);
    const thread_id dest = owner(i);
    if (dest == self_.id()) return invoke::make_ready_future(self_, T(local_[slot_of(i)]));
    const std::uint32_t id = registration_.id();
    return invoke::call_return<C, Policy>(self_, dest, [id, i](thread_context& s) {
      array& a = part_of(s, id);
      return T(a.local_[a.slot_of(i)]);
    });
  }
  /// The whole array in index order (asks every worker; meaningful after a barrier).
  std::vector<T> gather(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    const std::uint32_t id = registration_.id();
    std::vector<std::vector<T>> by_worker = detail::ask_every_worker(
        self_, [id](thread_context& s) { return part_of(s, id).local_; }, deadline);
    std::vector<T> out(static_cast<std::size_t>(size_));
    for (thread_id t = 0; t < workers_; ++t) {
      for (std::uint64_t k = 0; k < by_worker[t].size(); ++k) {
        out[static_cast<std::size_t>(index_of(t, k))] = std::move(by_worker[t][k]);
      }
    }
    return out;
  }

  /// Job-wide: every update made anywhere before it has been applied (the job's quiesce).
  void barrier(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    self_.quiesce(deadline);
  }
  /// barrier() with a deadline `timeout` from now.
  template <class Rep, class Period>
  void barrier(std::chrono::duration<Rep, Period> timeout) {
    self_.quiesce(timeout);
  }

  /// This thread's elements, in index order (element k is index index_of(self.id(), k)).
  [[nodiscard]] std::vector<T>& local() noexcept { return local_; }
  /// The index of element k of worker t's part.
  [[nodiscard]] std::uint64_t index_of(thread_id t, std::uint64_t k) const noexcept {
    return how_ == distribution::cyclic ? t + k * workers_ : first_of(t) + k;
  }

 private:
  std::size_t slot_of(std::uint64_t i) const noexcept {
    return static_cast<std::size_t>(how_ == distribution::cyclic ? i / workers_
                                                                 : i - first_of(owner(i)));
  }
  void check(std::uint64_t i) const {
    if (i >= size_) {
      throw error("containers::array: index " + std::to_string(i) + " is past the end (size " +
                  std::to_string(size_) + ")");
    }
  }
  static array& part_of(thread_context& s, std::uint32_t id) {
    return detail::part_of<array>(s, id, "array");
  }
  // Runs at(a[i], vals...) at i's owner: here at once, or as a call carrying `at` and the
  // values in its closure (all trivially copyable) or serialized as its arguments.
  template <class At, class... Vals>
  call_status run_at(std::uint64_t i, At at, const Vals&... vals) {
    check(i);
    const thread_id dest = owner(i);
    if (dest == self_.id()) {
      at(local_[slot_of(i)], vals...);
      return call_status::ok;
    }
    const std::uint32_t id = registration_.id();
    auto apply = [id, i, at](thread_context& s, const Vals&... v) {
      if (array* a = detail::containers_of(s).template find<array>(id)) {
        at(a->local_[a->slot_of(i)], v...);
      }
    };
    if constexpr ((std::is_trivially_copyable_v<Vals> && ...)) {
      return invoke::call<C, Policy>(self_, dest,
                                     [apply, vals...](thread_context& s) { apply(s, vals...); });
    } else {
      return invoke::call<C, Policy>(
          self_, dest, [apply](thread_context& s, Vals&... v) { apply(s, v...); }, vals...);
    }
  }

  thread_context& self_;
  std::uint64_t size_;
  distribution how_;
  thread_id workers_;
  std::vector<T> local_;
  detail::registration<array> registration_;  // last: made after, and gone before, the rest
};

}  // namespace seriema::containers
