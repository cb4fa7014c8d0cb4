// containers::counting_set: how many times each key was inserted anywhere in the job, with
// sender-side combining (a bounded cache merges repeated keys before they travel).
#pragma once

#include <cstdint>
#include <optional>
#include <seriema/containers/map.hpp>
#include <utility>
#include <vector>

namespace seriema::containers {

/// A count per key, partitioned over the worker threads as map<K, uint64_t> is (the same owner
/// per key), made by every worker in the same order as its other containers. insert(key) counts
/// one; repeated keys are merged at the sender in a direct-mapped cache of `cache_slots` slots
/// (a slot holds one key and its count; a key that lands on a slot held by another sends that
/// one on), so a skewed stream (word counts, degree histograms) sends one update per distinct
/// key and cache pass, not one per insert. Keys the sender owns are counted at once, uncached.
/// Everything cached goes out at barrier(), count(), size(), gather(), top_k() and flush().
/// Owner thread only.
template <class K, class Hash = owner_hash<K>>
class counting_set {
 public:
  /// The default cache: 1024 slots (a few tens of KiB for small keys, per worker).
  static constexpr std::size_t default_cache_slots = 1024;

  /// Collective, as map's constructor. `cache_slots` 0 turns combining off.
  explicit counting_set(thread_context& self, std::size_t cache_slots = default_cache_slots,
                        fabric::deadline_clock::time_point deadline = fabric::no_deadline)
      : counts_(self, deadline), cache_(cache_slots) {}

  /// Counts one more `key`. Returns what sending an evicted key returned (ok when nothing
  /// travelled).
  call_status insert(const K& key) {
    if (counts_.owner(key) == counts_.self().id() || cache_.empty()) return send(key, 1);
    slot& s = cache_[static_cast<std::size_t>(Hash{}(key) / counts_.self().thread_count() %
                                              cache_.size())];
    if (s.key && *s.key == key) {
      ++s.count;
      ++combined_;
      return call_status::ok;
    }
    call_status status = call_status::ok;
    if (s.key) status = send(*s.key, s.count);
    s.key = key;
    s.count = 1;
    return status;
  }
  /// Sends every cached count on; returns the first status that was not ok (or ok).
  call_status flush() {
    call_status first = call_status::ok;
    for (slot& s : cache_) {
      if (!s.key) continue;
      const call_status st = send(*s.key, s.count);
      if (first == call_status::ok) first = st;
      s.key.reset();
    }
    return first;
  }

  /// key's count at its owner once this thread's cached counts went out and arrived there.
  invoke::future<std::uint64_t> count(const K& key) {
    (void)flush();
    return counts_.find(key).then([](std::optional<std::uint64_t> n) { return n.value_or(0); });
  }
  /// Distinct keys counted anywhere (after a barrier: every worker's cache flushed).
  std::uint64_t size(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    (void)flush();
    return counts_.size(deadline);
  }
  /// Every key with its count.
  std::vector<std::pair<K, std::uint64_t>> gather(
      fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    (void)flush();
    return counts_.gather(deadline);
  }
  /// The k most counted keys, most first.
  std::vector<std::pair<K, std::uint64_t>> top_k(
      std::size_t k, fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    (void)flush();
    return counts_.top_k(k, std::less<std::uint64_t>{}, deadline);
  }
  /// Job-wide: flushes this worker's cache, then every insert made anywhere before it has been
  /// counted (a quiesce).
  void barrier(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    (void)flush();
    counts_.barrier(deadline);
  }
  /// barrier() with a deadline `timeout` from now.
  template <class Rep, class Period>
  void barrier(std::chrono::duration<Rep, Period> timeout) {
    (void)flush();
    counts_.barrier(timeout);
  }

  /// The owner of `key`.
  [[nodiscard]] thread_id owner(const K& key) const noexcept { return counts_.owner(key); }
  /// This thread's counts (the keys it owns).
  [[nodiscard]] const std::unordered_map<K, std::uint64_t>& local() const noexcept {
    return counts_.local();
  }
  /// Inserts this thread merged into a cached count instead of sending them.
  [[nodiscard]] std::uint64_t combined() const noexcept { return combined_; }
  /// Updates this thread sent (each carries a key and a count).
  [[nodiscard]] std::uint64_t sent() const noexcept { return sent_; }

 private:
  struct slot {
    std::optional<K> key;
    std::uint64_t count = 0;
  };
  call_status send(const K& key, std::uint64_t n) {
    if (counts_.owner(key) != counts_.self().id()) ++sent_;
    return counts_.reduce(key, n, [](std::uint64_t a, std::uint64_t b) { return a + b; });
  }

  map<K, std::uint64_t, Hash> counts_;
  std::vector<slot> cache_;
  std::uint64_t combined_ = 0;
  std::uint64_t sent_ = 0;
};

}  // namespace seriema::containers
