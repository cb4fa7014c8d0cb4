// containers::bag: an unordered collection of values spread over the worker threads of the job
// (no owner per value: inserts go round-robin), with a collective rebalance.
#pragma once

#include <chrono>
#include <cstdint>
#include <seriema/base/error.hpp>
#include <seriema/containers/detail/container_table.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/invoke.hpp>
#include <type_traits>
#include <utility>
#include <vector>

namespace seriema::containers {

using fabric::thread_context;
using fabric::thread_id;
using invoke::call_status;

/// A bag of T over the workers, made by every worker in the same order as its other containers
/// (collective). insert() sends each value to the next worker in a round-robin that starts at
/// the inserting thread, through channel C (values of any type cereal serializes; trivially
/// copyable ones in the call's closure); a part is a std::vector<T> on its worker. rebalance()
/// (collective) moves values so that the parts' sizes differ by one at most. barrier() (the
/// job's quiesce) orders everything. Failures as map's. Owner thread only.
template <class T, invoke::channel C = invoke::channel::adaptive, class Policy = invoke::policy::retry>
class bag {
 public:
  /// The kind, as errors name it.
  static constexpr const char* kind_name = "bag";
  using value_type = T;  ///< the values

  /// Makes this worker's part and waits until every worker made its own.
  explicit bag(thread_context& self,
               fabric::deadline_clock::time_point deadline = fabric::no_deadline)
      : self_(self), next_(self.id()), registration_(self, this, deadline) {}
  /// Leaves the job's bag (operations that reach this part later are dropped and counted).
  ~bag() = default;
  bag(const bag&) = delete;
  bag& operator=(const bag&) = delete;

  /// What containers::post and ask (any_thread.hpp) name this object by.
  [[nodiscard]] detail::part_key part_key() const noexcept { return registration_.key(); }
  /// The worker that made this object (the only one that uses it).
  [[nodiscard]] thread_context& self() const noexcept { return self_; }
  /// Adds `value` to the next worker's part (round-robin from this thread).
  call_status insert(const T& value) {
    const thread_id dest = next_;
    next_ = (next_ + 1) % self_.thread_count();
    return send(dest, value);
  }
  /// Values in the whole bag (asks every worker; meaningful after a barrier).
  std::uint64_t size(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    std::uint64_t total = 0;
    for (std::uint64_t n : sizes(deadline)) total += n;
    return total;
  }
  /// Every value of the bag, part after part.
  std::vector<T> gather(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    std::vector<T> out;
    for (auto& part : registration_.ask_every_part([](bag& b) { return b.local_; }, deadline)) {
      out.insert(out.end(), std::make_move_iterator(part.begin()),
                 std::make_move_iterator(part.end()));
    }
    return out;
  }
  /// Collective: after it, every part holds total / workers values (the first total % workers
  /// parts one more). Every worker computes the same plan from the parts' sizes and sends its
  /// surplus (taken from the back of its part) to the parts short of their share.
  void rebalance(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    barrier(deadline);
    const std::vector<std::uint64_t> have = sizes(deadline);
    barrier(deadline);  // every worker read the sizes before any value moves
    const std::uint64_t workers = have.size();
    std::uint64_t total = 0;
    for (std::uint64_t n : have) total += n;
    auto share = [&](std::uint64_t t) { return total / workers + (t < total % workers ? 1 : 0); };
    // Surplus and deficits in worker order, matched greedily: the same plan everywhere.
    std::uint64_t receiver = 0, missing = 0;
    for (std::uint64_t t = 0; t < workers; ++t) {
      std::uint64_t surplus = have[t] > share(t) ? have[t] - share(t) : 0;
      while (surplus > 0) {
        while (missing == 0) {
          missing = have[receiver] < share(receiver) ? share(receiver) - have[receiver] : 0;
          if (missing == 0) ++receiver;
        }
        const std::uint64_t moved = std::min(surplus, missing);
        if (t == self_.id()) {
          for (std::uint64_t k = 0; k < moved; ++k) {
            (void)send(static_cast<thread_id>(receiver), local_.back());
            local_.pop_back();
          }
        }
        surplus -= moved;
        missing -= moved;
        if (missing == 0) ++receiver;
      }
    }
    barrier(deadline);
  }
  /// Job-wide: every insert made anywhere before it has arrived (the job's quiesce).
  void barrier(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    self_.quiesce(deadline);
  }
  /// barrier() with a deadline `timeout` from now.
  template <class Rep, class Period>
  void barrier(std::chrono::duration<Rep, Period> timeout) {
    self_.quiesce(timeout);
  }
  /// This thread's part.
  [[nodiscard]] std::vector<T>& local() noexcept { return local_; }

 private:
  static bag& part_of(thread_context& s, std::uint32_t id) {
    return detail::part_of<bag>(s, id, kind_name);
  }
  call_status send(thread_id dest, const T& value) {
    if (dest == self_.id()) {
      local_.push_back(value);
      return call_status::ok;
    }
    const std::uint32_t id = registration_.id();
    auto add = [id](thread_context& s, const T& v) {
      if (bag* b = detail::containers_of(s).template find<bag>(id)) b->local_.push_back(v);
    };
    if constexpr (std::is_trivially_copyable_v<T>) {
      return invoke::call<C, Policy>(self_, dest, [add, value](thread_context& s) { add(s, value); });
    } else {
      return invoke::call<C, Policy>(
          self_, dest, [add](thread_context& s, T& v) { add(s, v); }, value);
    }
  }
  std::vector<std::uint64_t> sizes(fabric::deadline_clock::time_point deadline) {
    return registration_.ask_every_part([](bag& b) { return std::uint64_t{b.local_.size()}; },
                                        deadline);
  }
  thread_context& self_;
  thread_id next_;
  std::vector<T> local_;
  detail::registration<bag> registration_;  // last: made after, and gone before, the rest
};

}  // namespace seriema::containers
