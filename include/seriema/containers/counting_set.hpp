// containers::counting_set: how many times each key was inserted anywhere in the job, with
// sender-side combining (a bounded cache merges repeated keys before they travel).
#pragma once

#include <cstdint>
#include <optional>
#include <seriema/base/divider.hpp>
#include <seriema/containers/map.hpp>
#include <utility>
#include <vector>

namespace seriema::containers {

/// A count per key, partitioned over the worker threads as map<K, uint64_t> is (the same owner
/// per key), made by every worker in the same order as its other containers. insert(key) counts
/// one; repeated keys are merged at the sender in a direct-mapped cache of `cache_slots` slots
/// (a slot holds one key and its count; a key that lands on a slot held by another sends that
/// one on), so a skewed stream (word counts, degree histograms) sends one update per distinct
/// key and cache pass, not one per insert. Keys the sender owns are cached too (a hit costs one
/// hash and one comparison, less than a lookup in the part); the key's hash is computed once
/// per insert, for its owner and its slot.
/// Everything cached goes out at barrier(), count(), size(), gather(), top_k() and flush(), and
/// whenever the worker flushes its layers (an idle wait, each round of the job's quiesce): so
/// inserts made by calls the worker runs inside a barrier (containers::post) are counted by it.
/// Owner thread only.
template <class K, class Hash = owner_hash<K>>
class counting_set {
 public:
  /// The default cache: 16384 slots (384 KiB per worker for 8-byte keys, 768 KiB for short
  /// strings). Every key is cached, so a cache smaller than the keys a worker repeats evicts
  /// more than it merges: size it near the number of hot keys (bench/containers' word count:
  /// 65536 slots for a 131072-word vocabulary).
  static constexpr std::size_t default_cache_slots = 16384;

  /// Collective, as map's constructor. `cache_slots` 0 turns combining off.
  explicit counting_set(thread_context& self, std::size_t cache_slots = default_cache_slots,
                        fabric::deadline_clock::time_point deadline = fabric::no_deadline)
      : counts_(self, deadline), cache_(cache_slots), by_slots_(cache_slots) {
    if (!cache_.empty()) {
      detail::containers_of(self).add_flusher(this, [](void* me) {
        (void)static_cast<counting_set*>(me)->flush();
      });
    }
  }
  /// Leaves the job's counting_set (cached counts are dropped: call barrier() first).
  ~counting_set() { detail::containers_of(counts_.self()).remove_flusher(this); }
  counting_set(const counting_set&) = delete;
  counting_set& operator=(const counting_set&) = delete;

  /// What containers::post and ask (any_thread.hpp) name this object by.
  [[nodiscard]] detail::part_key part_key() const noexcept { return counts_.part_key(); }
  /// The worker that made this object (the only one that uses it).
  [[nodiscard]] thread_context& self() const noexcept { return counts_.self(); }
  /// Counts one more `key`. Returns what sending an evicted key returned (ok when nothing
  /// travelled).
  call_status insert(const K& key) {
    if (cache_.empty()) return send(key, 1);
    // The owner is the hash modulo the workers (its low bits); the slot comes from its high half.
    slot& s = cache_[static_cast<std::size_t>(by_slots_.remainder(Hash{}(key) >> 32))];
    if (s.key && *s.key == key) {
      ++s.count;
      ++combined_;
      return call_status::ok;
    }
    // The slot is taken over before the evicted count is sent: a send that waits for room runs
    // calls, which may insert here again.
    std::optional<K> evicted = std::exchange(s.key, key);
    const std::uint64_t evicted_count = std::exchange(s.count, 1);
    return evicted ? send(*evicted, evicted_count) : call_status::ok;
  }
  /// Sends every cached count on; returns the first status that was not ok (or ok).
  call_status flush() {
    call_status first = call_status::ok;
    for (slot& s : cache_) {
      if (!s.key) continue;
      std::optional<K> key = std::exchange(s.key, std::nullopt);  // emptied first, as insert's
      const call_status st = send(*key, s.count);
      if (first == call_status::ok) first = st;
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
  /// Inserts this thread merged into a cached count (applied later as one update).
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
  divider by_slots_;  // by cache_.size()
  std::uint64_t combined_ = 0;
  std::uint64_t sent_ = 0;
};

}  // namespace seriema::containers
