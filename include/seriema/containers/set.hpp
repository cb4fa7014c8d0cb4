// containers::set: a set of keys partitioned over the worker threads of the job (one owner per
// key), updated by aggregated one-sided calls, asked with futures.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <seriema/containers/map.hpp>
#include <unordered_map>
#include <utility>
#include <vector>

namespace seriema::containers {

/// A set of K over the workers: a map<K, unit> underneath (the same owners, order, what travels,
/// failures and lifetime: docs/containers.md), made by every worker in the same order as its
/// other containers. Owner thread only.
template <class K, class Hash = owner_hash<K>, invoke::channel C = invoke::channel::adaptive,
          class Policy = invoke::policy::retry>
class set {
 public:
  using key_type = K;  ///< the keys

  /// Collective, as map's constructor.
  explicit set(thread_context& self,
               fabric::deadline_clock::time_point deadline = fabric::no_deadline)
      : keys_(self, deadline) {}

  /// What containers::post and ask (any_thread.hpp) name this object by.
  [[nodiscard]] detail::part_key part_key() const noexcept { return keys_.part_key(); }
  /// The worker that made this object (the only one that uses it).
  [[nodiscard]] thread_context& self() const noexcept { return keys_.self(); }
  /// Adds key (nothing when it is there).
  call_status insert(const K& key) { return keys_.insert(key, present{}); }
  /// Removes key (nothing when it is not there).
  call_status erase(const K& key) { return keys_.erase(key); }
  /// Whether key is in the set, read at its owner after this thread's earlier updates there.
  invoke::future<bool> contains(const K& key) {
    return keys_.find(key).then([](const std::optional<present>& found) {
      return found.has_value();
    });
  }
  /// Keys in the whole set (asks every worker; meaningful after a barrier).
  std::uint64_t size(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    return keys_.size(deadline);
  }
  /// Every key of the set, in no particular order.
  std::vector<K> gather(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    std::vector<K> out;
    for (auto& [key, unused] : keys_.gather(deadline)) out.push_back(std::move(key));
    return out;
  }
  /// Job-wide: every update made anywhere before it has been applied (the job's quiesce).
  void barrier(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    keys_.barrier(deadline);
  }
  /// barrier() with a deadline `timeout` from now.
  template <class Rep, class Period>
  void barrier(std::chrono::duration<Rep, Period> timeout) {
    keys_.barrier(timeout);
  }
  /// The owner of `key`.
  [[nodiscard]] thread_id owner(const K& key) const noexcept { return keys_.owner(key); }
  /// Runs f(key) on every key this thread owns.
  template <class F>
  void for_each_local(F f) {
    for (const auto& [key, unused] : keys_.local()) f(key);
  }
  /// Keys this thread owns.
  [[nodiscard]] std::size_t local_size() const noexcept { return keys_.local().size(); }

 private:
  /// The mapped value: nothing (one byte on the wire).
  struct present {
    template <class Archive>
    void serialize(Archive&) {}
  };

  map<K, present, Hash, C, Policy> keys_;
};

}  // namespace seriema::containers
