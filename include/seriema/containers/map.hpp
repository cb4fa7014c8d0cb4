// containers::map: a key-value map partitioned over the worker threads of the job (one owner
// thread per key, so no locks), updated by aggregated one-sided calls, read with futures.
#pragma once

#include <cereal/types/optional.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/utility.hpp>
#include <cereal/types/vector.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <seriema/base/divider.hpp>
#include <seriema/base/error.hpp>
#include <seriema/containers/detail/container_table.hpp>
#include <seriema/containers/detail/run_at.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/invoke.hpp>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace seriema::containers {

using fabric::thread_context;
using fabric::thread_id;
using invoke::call_status;

/// Bounds on a container's parts (each worker's).
struct limits {
  /// Keys a part may hold; an operation that would add one more is refused at the owner.
  std::size_t max_local_entries = std::numeric_limits<std::size_t>::max();
};

/// Which worker thread owns a key: std::hash (the same in every process of one program) mixed
/// by splitmix64's finalizer, so that consecutive integer keys spread over every owner.
template <class K>
struct owner_hash {
  /// The key's 64-bit hash (its owner is this modulo the number of workers).
  std::uint64_t operator()(const K& key) const noexcept {
    auto x = static_cast<std::uint64_t>(std::hash<K>{}(key));
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
  }
};

/// A map from K to V whose entries live at their owner threads (`owner(key)`), each thread
/// holding its part in a std::unordered_map. Every worker of runtime::run makes the map, in the
/// same order as its other containers (the constructor is collective); updates (insert,
/// insert_or_assign, erase, visit, reduce) are one-sided calls through channel C (adaptive:
/// batched per destination while it is busy, at once while it is idle) with the full-destination policy Policy, applied at the owner in the order
/// each sender made them; find, size, gather and top_k answer with futures or values. Keys and
/// values of any type cereal serializes; trivially copyable ones travel in the call's closure,
/// with no serialization. barrier() (the job's quiesce) is the container barrier: after it, every
/// update made before it anywhere has been applied. An owner whose process died fails what is
/// sent to it: the update's call_status (peer_failed), the future's outcome, barrier() throws.
/// Owner thread only: a map object is used by the worker that made it.
template <class K, class V, class Hash = owner_hash<K>, invoke::channel C = invoke::channel::adaptive,
          class Policy = invoke::policy::retry>
class map {
 public:
  /// The kind, as errors name it.
  static constexpr const char* kind_name = "map";
  using key_type = K;     ///< the keys
  using mapped_type = V;  ///< the values

  /// Makes this worker's part and waits until every worker made its own (a job-wide quiesce,
  /// by `deadline` at the latest: throws as quiesce does).
  explicit map(thread_context& self,
               fabric::deadline_clock::time_point deadline = fabric::no_deadline)
      : map(self, limits{}, deadline) {}
  /// As above, with a bound on each part: an operation that would add a key to a part holding
  /// `bounds.max_local_entries` already is refused there (not applied), counted (refused(),
  /// counters containers.refused) and logged once by that worker; never an allocation failure.
  map(thread_context& self, limits bounds,
      fabric::deadline_clock::time_point deadline = fabric::no_deadline)
      : self_(self), workers_(self.thread_count()), max_local_entries_(bounds.max_local_entries),
        registration_(self, this, deadline) {}
  /// Leaves the job's map: operations that reach this thread's part later are dropped, counted
  /// and logged (call barrier() first when updates may still be on their way).
  ~map() = default;
  map(const map&) = delete;
  map& operator=(const map&) = delete;

  /// The worker that made this object (the only one that uses it).
  [[nodiscard]] thread_context& self() const noexcept { return self_; }
  /// What containers::post and ask (any_thread.hpp) name this object by.
  [[nodiscard]] detail::part_key part_key() const noexcept { return registration_.key(); }
  /// The worker thread that owns `key`.
  [[nodiscard]] thread_id owner(const K& key) const noexcept {
    return static_cast<thread_id>(workers_.remainder(Hash{}(key)));
  }

  /// Adds (key, value) unless the key is there (then nothing changes).
  call_status insert(const K& key, const V& value) {
    return run_at(
        owner(key),
        [](map& m, const K& k, const V& v) {
          if (m.room_for(k)) m.local_.try_emplace(k, v);
        },
        key, value);
  }
  /// Sets key's value, adding the key when it is not there.
  call_status insert_or_assign(const K& key, const V& value) {
    return run_at(owner(key),
                  [](map& m, const K& k, const V& v) {
                    if (m.room_for(k)) m.local_.insert_or_assign(k, v);
                  },
                  key, value);
  }
  /// Removes the key (nothing when it is not there).
  call_status erase(const K& key) {
    return run_at(owner(key), [](map& m, const K& k) { m.local_.erase(k); }, key);
  }
  /// Combines `value` into key's: op(current, value), or `value` itself when the key is new.
  /// `op` runs at the owner (a closure: trivially copyable, no pointers into this process).
  template <class Op>
  call_status reduce(const K& key, const V& value, Op op) {
    return run_at(
        owner(key),
        [op](map& m, const K& k, const V& v) {
          if (!m.room_for(k)) return;
          auto [at, added] = m.local_.try_emplace(k, v);
          if (!added) at->second = op(at->second, v);
        },
        key, value);
  }
  /// Runs f(key, value, args...) at the owner, or f(map, key, value, args...) (the owner's map,
  /// to make further operations from there); value is a V& (value-initialized when the key was
  /// not there). The arguments travel as values (serialized unless trivially copyable).
  template <class F, class... Args>
  call_status visit(const K& key, F f, const Args&... args) {
    return run_at(
        owner(key),
        [f](map& m, const K& k, const Args&... a) {
          if (!m.room_for(k)) return;
          V& value = m.local_[k];
          std::tuple<Args...> copies(a...);
          std::apply(
              [&](Args&... own) {
                if constexpr (std::is_invocable_v<const F&, map&, const K&, V&, Args&...>) {
                  f(m, k, value, own...);
                } else {
                  f(k, value, own...);
                }
              },
              copies);
        },
        key, args...);
  }

  /// Key's value at its owner when the future ends (std::nullopt when absent). It is read after
  /// every update this thread sent to that owner before (one channel, in order).
  invoke::future<std::optional<V>> find(const K& key) {
    const thread_id dest = owner(key);
    if (dest == self_.id()) return invoke::make_ready_future(self_, lookup(key));
    const std::uint32_t id = registration_.id();
    if constexpr (std::is_trivially_copyable_v<K>) {
      return invoke::call_return<C, Policy>(self_, dest, [id, key](thread_context& s) {
        return part_of(s, id).lookup(key);
      });
    } else {
      return invoke::call_return<C, Policy>(
          self_, dest, [id](thread_context& s, K& k) { return part_of(s, id).lookup(k); }, key);
    }
  }

  /// Entries of every part, summed (asks every worker; meaningful after a barrier).
  std::uint64_t size(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    std::uint64_t total = 0;
    const auto entries = [](map& m) { return std::uint64_t{m.local_.size()}; };
    for (std::uint64_t n : registration_.ask_every_part(entries, deadline)) {
      total += n;
    }
    return total;
  }
  /// Every entry of the map, from every part (in no particular order).
  std::vector<std::pair<K, V>> gather(
      fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    std::vector<std::pair<K, V>> out;
    const auto entries = [](map& m) { return m.local_entries(); };
    for (auto& part : registration_.ask_every_part(entries, deadline)) {
      out.insert(out.end(), std::make_move_iterator(part.begin()),
                 std::make_move_iterator(part.end()));
    }
    return out;
  }
  /// The k entries with the largest values (by `less` on values; ties in no particular order),
  /// largest first: each part sends its own k largest.
  template <class Less = std::less<V>>
  std::vector<std::pair<K, V>> top_k(std::size_t k, Less less = {},
                                     fabric::deadline_clock::time_point deadline =
                                         fabric::no_deadline) {
    const std::uint64_t count = k;
    std::vector<std::pair<K, V>> out;
    for (auto& part : registration_.ask_every_part(
             [count, less](map& m) { return largest(m.local_entries(), count, less); },
             deadline)) {
      out.insert(out.end(), std::make_move_iterator(part.begin()),
                 std::make_move_iterator(part.end()));
    }
    return largest(std::move(out), count, less);
  }

  /// Job-wide: returns once every update made anywhere before it has been applied (every worker
  /// calls it; runtime quiesce, with its deadline and failures).
  void barrier(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    self_.quiesce(deadline);
  }
  /// barrier() with a deadline `timeout` from now.
  template <class Rep, class Period>
  void barrier(std::chrono::duration<Rep, Period> timeout) {
    self_.quiesce(timeout);
  }

  /// This thread's part (the entries it owns).
  [[nodiscard]] const std::unordered_map<K, V>& local() const noexcept { return local_; }
  /// Runs f(key, value) on every entry of this thread's part (value is a V&).
  template <class F>
  void for_each_local(F f) {
    for (auto& [key, value] : local_) f(key, value);
  }

 private:
  // The part of container `id` at thread `s`; throws seriema::error when it does not exist
  // there (the caller's future fails with that error).
  static map& part_of(thread_context& s, std::uint32_t id) {
    return detail::part_of<map>(s, id, kind_name);
  }
  std::optional<V> lookup(const K& key) const {
    auto at = local_.find(key);
    if (at == local_.end()) return std::nullopt;
    return at->second;
  }
  std::vector<std::pair<K, V>> local_entries() const { return {local_.begin(), local_.end()}; }
  // Whether key may be in this part: it is there, or the part holds fewer than its bound (a
  // refusal is counted and logged by the thread's table).
  bool room_for(const K& key) {
    if (local_.size() < max_local_entries_ || local_.contains(key)) return true;
    detail::containers_of(self_).refuse("map", max_local_entries_);
    return false;
  }
  template <class Less>
  static std::vector<std::pair<K, V>> largest(std::vector<std::pair<K, V>> entries,
                                              std::uint64_t k, Less less) {
    auto larger = [&](const auto& a, const auto& b) { return less(b.second, a.second); };
    const auto keep = static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(k, entries.size()));
    std::partial_sort(entries.begin(), entries.begin() + keep, entries.end(), larger);
    entries.resize(static_cast<std::size_t>(keep));
    return entries;
  }

  // Runs at(part, vals...) at `dest`'s part (detail::run_at).
  template <class At, class... Vals>
  call_status run_at(thread_id dest, At at, const Vals&... vals) {
    return detail::run_at<C, Policy>(*this, self_, registration_.table(), registration_.id(),
                                      dest, at, vals...);
  }

  thread_context& self_;
  divider workers_;  // by the job's worker threads (fixed for the runtime's life)
  std::unordered_map<K, V, std::hash<K>> local_;
  std::size_t max_local_entries_;
  detail::registration<map> registration_;  // last: made after, and gone before, the rest
};

}  // namespace seriema::containers
