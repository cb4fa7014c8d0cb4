// containers::disjoint_set: a union-find over keys partitioned over the worker threads of the job
// (each key's parent lives at the key's owner), united by aggregated one-sided calls that walk
// the two trees toward their roots, with no locks and no round trips.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <seriema/base/divider.hpp>
#include <seriema/containers/detail/container_table.hpp>
#include <seriema/containers/detail/run_at.hpp>
#include <seriema/containers/map.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/invoke.hpp>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace seriema::containers {

/// A partition of keys into disjoint sets. Each key's parent is held by the key's owner
/// (`owner(key)`); a key no operation named is a set of its own. Keys are totally ordered by
/// (Hash(key), key) and a parent always comes before its child in that order, so the trees have
/// no cycles and a set's root is its first key in that order, whoever united what in which
/// order (the order spreads the roots over the owners; K needs operator<).
///
/// unite(a, b) is a chain of one-sided calls (channel C, policy Policy): at x's owner, with y
/// before x, a root x gets y as its parent (the two sets are merged); otherwise x's parent p is
/// replaced by y when y comes before p (path compression on the way) and the chain goes on with
/// the later of (p, y) and the earlier one, whose first key comes strictly earlier than x: it ends.
/// It ends without a merge when p is y. Every merge is one link, made by exactly one unite.
///
/// Made by every worker in the same order as its other containers (collective). barrier() (the
/// job's quiesce) is the container barrier: after it every unite made before it has ended.
/// compress() (collective, after the unites) points every key at its root and stores every key
/// a unite named; set_count() and gather() are exact after it. find() during unites returns a
/// root of the moment (exact after a barrier). Failures as map's: a call to a dead owner returns
/// peer_failed (a chain that reaches it is lost, and the next barrier throws), find's future
/// fails. Keys of any cereal type (trivially copyable ones travel in the closure). Owner thread
/// only.
template <class K, class Hash = owner_hash<K>, invoke::channel C = invoke::channel::adaptive,
          class Policy = invoke::policy::retry>
class disjoint_set {
 public:
  /// The kind, as errors name it.
  static constexpr const char* kind_name = "disjoint_set";
  using key_type = K;  ///< the keys

  /// Makes this worker's part and waits until every worker made its own (a job-wide quiesce,
  /// by `deadline` at the latest).
  explicit disjoint_set(thread_context& self,
                        fabric::deadline_clock::time_point deadline = fabric::no_deadline)
      : self_(self), workers_(self.thread_count()), registration_(self, this, deadline) {}
  /// Leaves the job's disjoint_set: operations that reach this part later are dropped and
  /// counted (call barrier() first when unites may still be on their way).
  ~disjoint_set() = default;
  disjoint_set(const disjoint_set&) = delete;
  disjoint_set& operator=(const disjoint_set&) = delete;

  /// The worker that made this object (the only one that uses it).
  [[nodiscard]] thread_context& self() const noexcept { return self_; }
  /// What containers::post and ask (any_thread.hpp) name this object by.
  [[nodiscard]] detail::part_key part_key() const noexcept { return registration_.key(); }
  /// The worker that holds key's parent.
  [[nodiscard]] thread_id owner(const K& key) const noexcept {
    return static_cast<thread_id>(workers_.remainder(Hash{}(key)));
  }
  /// Whether a comes before b in the keys' order (so b can have a as its parent).
  [[nodiscard]] static bool before(const K& a, const K& b) {
    const std::uint64_t ha = Hash{}(a), hb = Hash{}(b);
    return ha != hb ? ha < hb : std::less<K>{}(a, b);
  }

  /// Merges the sets of a and b (nothing when they are one set already). The call_status is
  /// the first step's (to a's or b's owner); later steps are calls from owner to owner.
  call_status unite(const K& a, const K& b) { return start(a, b, nothing{}); }
  /// unite(a, b), then, when it merged two sets (exactly one unite per merge does), runs
  /// f(a, b, args...) or f(disjoint_set&, a, b, args...) at the worker where they merged (the
  /// owner of one of the two roots). `f` is a closure (trivially copyable, no pointers into this
  /// process); the arguments travel as values with every step.
  template <class F, class... Args>
  call_status unite_and_run(const K& a, const K& b, F f, const Args&... args) {
    return start(
        a, b,
        [f](disjoint_set& d, const K& a0, const K& b0, const Args&... more) {
          if constexpr (std::is_invocable_v<const F&, disjoint_set&, const K&, const K&,
                                            const Args&...>) {
            f(d, a0, b0, more...);
          } else {
            f(a0, b0, more...);
          }
        },
        a, b, args...);
  }

  /// key's root when the future ends: the chain of parents followed owner to owner (each owner
  /// answers when the next one did). Exact after a barrier; during unites, a root of the moment.
  invoke::future<K> find(const K& key) {
    const std::uint32_t id = registration_.id();
    if constexpr (std::is_trivially_copyable_v<K>) {
      return invoke::call_return<C, Policy>(
          self_, owner(key), [id, key](thread_context& s) { return root_from(s, id, key); });
    } else {
      return invoke::call_return<C, Policy>(
          self_, owner(key), [id](thread_context& s, K& k) { return root_from(s, id, k); }, key);
    }
  }

  /// Collective (every worker calls it, after its unites): a barrier, then rounds of pointer
  /// jumping (each key's parent becomes its grandparent) until one changes nothing anywhere;
  /// then every key a unite named is stored at its owner with its root as parent. Each round is
  /// a barrier and an exchange of counts, by `deadline` (throws as barrier() does).
  void compress(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    barrier(deadline);
    for (std::uint32_t round = 0;; ++round) {
      jump_once(round);
      barrier(deadline);
      if (changes_everywhere(round, deadline) == 0) return;
    }
  }

  /// Sets among the keys unites named (asks every worker; exact after compress()).
  std::uint64_t set_count(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    std::uint64_t total = 0;
    const auto roots = [](disjoint_set& d) { return d.local_roots(); };
    for (std::uint64_t n : registration_.ask_every_part(roots, deadline)) {
      total += n;
    }
    return total;
  }
  /// Every (key, parent) pair of every part: (key, root) after compress(), in no particular
  /// order.
  std::vector<std::pair<K, K>> gather(
      fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    std::vector<std::pair<K, K>> out;
    for (auto& part : registration_.ask_every_part(
             [](disjoint_set& d) {
               return std::vector<std::pair<K, K>>(d.parent_.begin(), d.parent_.end());
             },
             deadline)) {
      out.insert(out.end(), std::make_move_iterator(part.begin()),
                 std::make_move_iterator(part.end()));
    }
    return out;
  }

  /// Job-wide: every unite made anywhere before it has ended (the job's quiesce).
  void barrier(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    self_.quiesce(deadline);
  }
  /// barrier() with a deadline `timeout` from now.
  template <class Rep, class Period>
  void barrier(std::chrono::duration<Rep, Period> timeout) {
    self_.quiesce(timeout);
  }

  /// This thread's part: key -> parent for the keys it owns and has seen (a key that is a root
  /// and was only ever named as a target may be absent until compress()).
  [[nodiscard]] const std::unordered_map<K, K>& local() const noexcept { return parent_; }
  /// Sets merged at this thread (links made here).
  [[nodiscard]] std::uint64_t local_merges() const noexcept { return merges_; }

 private:
  /// unite's continuation when it merges nothing else: none.
  struct nothing {
    void operator()(disjoint_set&) const noexcept {}
  };

  static disjoint_set& part_of(thread_context& s, std::uint32_t id) {
    return detail::part_of<disjoint_set>(s, id, kind_name);
  }
  // key's parent here, storing key as a root of its own when it is new.
  K& parent_here(const K& key) { return parent_.try_emplace(key, key).first->second; }

  // The first step of unite: to the owner of whichever of a, b comes later.
  template <class Then, class... Extra>
  call_status start(const K& a, const K& b, Then then, const Extra&... extra) {
    if (a == b) return call_status::ok;
    return before(b, a) ? send_hook(a, b, then, extra...) : send_hook(b, a, then, extra...);
  }
  template <class Then, class... Extra>
  call_status send_hook(const K& x, const K& y, Then then, const Extra&... extra) {
    return run_at(
        owner(x),
        [then](disjoint_set& d, const K& x0, const K& y0, const Extra&... e) {
          d.hook(x0, y0, then, e...);
        },
        x, y, extra...);
  }
  // At x's owner, y before x: links a root x under y, or compresses x's parent toward y and goes
  // on with (parent, y) in order, or ends when they are one set.
  template <class Then, class... Extra>
  void hook(const K& x, const K& y, Then then, const Extra&... extra) {
    K& parent = parent_here(x);
    if (parent == x) {
      parent = y;
      ++merges_;
      then(*this, extra...);
      return;
    }
    if (parent == y) return;
    const K p = parent;
    if (before(y, p)) parent = y;  // x ~ y, y earlier: a shorter path, and p ~ y follows
    if (before(y, p)) {
      (void)send_hook(p, y, then, extra...);
    } else {
      (void)send_hook(y, p, then, extra...);
    }
  }

  // One round of pointer jumping: every key here whose parent is not itself asks its parent's
  // owner for the grandparent, which answers (when it differs from the parent) by setting it.
  void jump_once(std::uint32_t round) {
    std::vector<std::pair<K, K>> asks;  // a snapshot: answers here may add keys (rehash)
    for (const auto& [key, parent] : parent_) {
      if (!(parent == key)) asks.emplace_back(key, parent);
    }
    for (const auto& [key, parent] : asks) {
      (void)run_at(
          owner(parent),
          [](disjoint_set& d, const K& p, const K& child, const std::uint32_t& r) {
            const K grandparent = d.parent_here(p);
            if (grandparent == p) return;
            (void)d.run_at(
                d.owner(child),
                [](disjoint_set& d2, const K& c, const K& g, const std::uint32_t& r2) {
                  d2.adopt(c, g, r2);
                },
                child, grandparent, r);
          },
          parent, key, round);
    }
  }
  // key's parent becomes `grandparent` (earlier than it), counted for `round`.
  void adopt(const K& key, const K& grandparent, std::uint32_t round) {
    K& parent = parent_here(key);
    if (!before(grandparent, parent)) return;
    parent = grandparent;
    if (changes_.size() <= round) changes_.resize(round + 1);
    ++changes_[round];
  }
  // The parents changed in `round` at every worker (each worker's count, asked after the
  // round's barrier; counts are kept per round, so a worker already in the next round adds to
  // another one).
  std::uint64_t changes_everywhere(std::uint32_t round,
                                   fabric::deadline_clock::time_point deadline) {
    std::uint64_t total = 0;
    for (std::uint64_t n : registration_.ask_every_part(
             [round](disjoint_set& d) {
               return round < d.changes_.size() ? d.changes_[round] : std::uint64_t{0};
             },
             deadline)) {
      total += n;
    }
    return total;
  }
  std::uint64_t local_roots() const {
    std::uint64_t roots = 0;
    for (const auto& [key, parent] : parent_) roots += parent == key ? 1 : 0;
    return roots;
  }

  // The root of `key`, starting at its owner (thread s): follows parents held here, and asks
  // the next owner (a deferred answer) when the chain leaves this thread.
  static task<K> root_from(thread_context& s, std::uint32_t id, K key) {
    disjoint_set& d = part_of(s, id);
    for (;;) {
      auto at = d.parent_.find(key);
      if (at == d.parent_.end() || at->second == key) co_return key;
      key = at->second;
      const thread_id next = d.owner(key);
      if (next == s.id()) continue;
      co_return co_await d.ask_root_at(next, key);
    }
  }
  invoke::future<K> ask_root_at(thread_id dest, const K& key) {
    const std::uint32_t id = registration_.id();
    if constexpr (std::is_trivially_copyable_v<K>) {
      return invoke::call_return<C, Policy>(
          self_, dest, [id, key](thread_context& s) { return root_from(s, id, key); });
    } else {
      return invoke::call_return<C, Policy>(
          self_, dest, [id](thread_context& s, K& k) { return root_from(s, id, k); }, key);
    }
  }

  // Runs at(part, vals...) at `dest`'s part (detail::run_at).
  template <class At, class... Vals>
  call_status run_at(thread_id dest, At at, const Vals&... vals) {
    return detail::run_at<C, Policy>(*this, self_, registration_.table(), registration_.id(),
                                      dest, at, vals...);
  }

  thread_context& self_;
  divider workers_;  // by the job's worker threads
  std::unordered_map<K, K> parent_;
  std::uint64_t merges_ = 0;
  std::vector<std::uint64_t> changes_;  // parents changed by compress(), per round
  detail::registration<disjoint_set> registration_;  // last: made after, gone before the rest
};

}  // namespace seriema::containers
