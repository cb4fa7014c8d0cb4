// containers::array: a fixed-size array of T partitioned over the worker threads of the job (a
// block or cyclic distribution of indexes), updated by aggregated one-sided calls.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <seriema/base/divider.hpp>
#include <seriema/base/error.hpp>
#include <seriema/containers/detail/container_table.hpp>
#include <seriema/containers/detail/packed_batches.hpp>
#include <seriema/fabric/runtime.hpp>
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
/// order; barrier() (the job's quiesce) orders everything. Values of any type cereal serializes.
/// Updates whose values are trivially copyable (set and add of such a T; visit with a function
/// without captures and such arguments) are packed: per destination, entries of (slot, values)
/// appended to a batch that goes as one call per `packed_bytes` bytes, before anything else to
/// that destination, and at every flush (flush(), barrier(), get(), gather(), the worker's idle
/// waits and quiesce rounds). Other updates are one call each. An index past the end throws
/// seriema::error at the caller. Failures as map's: an update to an owner known dead returns
/// peer_failed (what was packed for it is dropped), a get's future fails, barrier() throws.
/// Owner thread only.
template <class T, invoke::channel C = invoke::channel::adaptive, class Policy = invoke::policy::retry>
class array {
 public:
  /// The kind, as errors name it.
  static constexpr const char* kind_name = "array";
  using value_type = T;  ///< the elements
  /// The bytes a destination's batch of packed updates reaches before it is sent (128 updates
  /// of an 8-byte T).
  static constexpr std::size_t packed_bytes = 2048;

  /// Makes this worker's elements and waits until every worker made its own (a job-wide
  /// quiesce, by `deadline` at the latest).
  array(thread_context& self, std::uint64_t size, distribution how = distribution::block,
        fabric::deadline_clock::time_point deadline = fabric::no_deadline)
      : self_(self), size_(size), how_(how), workers_(self.thread_count()),
        base_(size / workers_), extra_(size % workers_), in_long_(extra_ * (base_ + 1)),
        by_workers_(workers_), by_long_(base_ + 1), by_base_(base_),
        local_(static_cast<std::size_t>(count_of(self.id()))),
        batches_(self, detail::containers_of(self), workers_, packed_bytes),
        registration_(self, this, deadline) {
    detail::containers_of(self).add_flusher(this, [](void* me) {
      (void)static_cast<array*>(me)->flush();
    });
  }
  /// Leaves the job's array: operations that reach this part later are dropped and counted, and
  /// packed updates not yet sent are dropped (call barrier() first).
  ~array() { detail::containers_of(self_).remove_flusher(this); }
  array(const array&) = delete;
  array& operator=(const array&) = delete;

  /// What containers::post and ask (any_thread.hpp) name this object by.
  [[nodiscard]] detail::part_key part_key() const noexcept { return registration_.key(); }
  /// The worker that made this object (the only one that uses it).
  [[nodiscard]] thread_context& self() const noexcept { return self_; }
  /// Elements in the whole array.
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  /// The worker that owns index i.
  [[nodiscard]] thread_id owner(std::uint64_t i) const noexcept { return locate(i).owner; }
  /// The first index worker t owns.
  [[nodiscard]] std::uint64_t first_of(thread_id t) const noexcept {
    if (how_ == distribution::cyclic) return t;
    return t * base_ + std::min<std::uint64_t>(t, extra_);
  }
  /// How many indexes worker t owns.
  [[nodiscard]] std::uint64_t count_of(thread_id t) const noexcept {
    return base_ + (t < extra_ ? 1 : 0);  // either distribution
  }

  /// a[i] = value. Returns ok once packed (see the class), or the call's status.
  call_status set(std::uint64_t i, const T& value) { return update<assign>(i, value); }
  /// a[i] = a[i] + value (any T with +).
  call_status add(std::uint64_t i, const T& value) { return update<plus>(i, value); }
  /// Runs f(i, a[i], args...) at the owner (a T&; the arguments travel as values, as lvalues).
  template <class F, class... Args>
  call_status visit(std::uint64_t i, F f, const Args&... args) {
    if constexpr (std::is_empty_v<F> && std::is_default_constructible_v<F>) {
      return update<visitor<F>>(i, args...);
    } else {
      return run_at(
          i,
          [f, i](T& element, const Args&... a) {
            std::tuple<Args...> copies(a...);
            std::apply([&](Args&... own) { f(i, element, own...); }, copies);
          },
          args...);
    }
  }
  /// Sends every destination's packed updates; returns the first status that was not ok.
  call_status flush() { return batches_.flush_all(this); }
  /// a[i] at its owner when the future ends, after every update this thread sent there before.
  invoke::future<T> get(std::uint64_t i) {
    check(i);
    const thread_id dest = owner(i);
    if (dest == self_.id()) return invoke::make_ready_future(self_, T(local_[slot_of(i)]));
    (void)batches_.flush(this, dest);
    const std::uint32_t id = registration_.id();
    return invoke::call_return<C, Policy>(self_, dest, [id, i](thread_context& s) {
      array& a = part_of(s, id);
      return T(a.local_[a.slot_of(i)]);
    });
  }
  /// The whole array in index order (asks every worker; meaningful after a barrier).
  std::vector<T> gather(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    (void)flush();
    std::vector<std::vector<T>> by_worker =
        registration_.ask_every_part([](array& part) { return part.local_; }, deadline);
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
    (void)flush();
    self_.quiesce(deadline);
  }
  /// barrier() with a deadline `timeout` from now.
  template <class Rep, class Period>
  void barrier(std::chrono::duration<Rep, Period> timeout) {
    (void)flush();
    self_.quiesce(timeout);
  }

  /// This thread's elements, in index order (element k is index index_of(self.id(), k)).
  [[nodiscard]] std::vector<T>& local() noexcept { return local_; }
  /// The index of element k of worker t's part.
  [[nodiscard]] std::uint64_t index_of(thread_id t, std::uint64_t k) const noexcept {
    return how_ == distribution::cyclic ? t + k * workers_ : first_of(t) + k;
  }

 private:
  // The packable operations: op(i, element, values...) with the values as lvalues.
  struct assign {
    void operator()(std::uint64_t, T& element, T& value) const { element = value; }
  };
  struct plus {
    void operator()(std::uint64_t, T& element, T& value) const { element = element + value; }
  };
  template <class F>
  struct visitor {
    template <class... Args>
    void operator()(std::uint64_t i, T& element, Args&... args) const {
      F{}(i, element, args...);
    }
  };
  template <class... Vals>
  static constexpr bool packable =
      ((std::is_trivially_copyable_v<Vals> && std::is_default_constructible_v<Vals>) && ...);

  // Op(i, a[i], copies of vals...) at i's owner: here at once; packed for a live owner when the
  // values are packable; else one call (after what is packed for that owner).
  template <class Op, class... Vals>
  call_status update(std::uint64_t i, const Vals&... vals) {
    if constexpr (packable<Vals...>) {
      check(i);
      const place at = locate(i);
      if (at.owner == self_.id()) {
        apply<Op>(i, local_[at.slot], vals...);
        return call_status::ok;
      }
      if (owner_failed(at.owner)) {
        batches_.drop(at.owner);
        return call_status::peer_failed;
      }
      return batches_.append(this, at.owner, &send_packed<Op, Vals...>,
                             std::uint64_t{at.slot}, vals...);
    } else {
      return run_at(
          i, [i](T& element, const Vals&... v) { apply<Op>(i, element, v...); }, vals...);
    }
  }
  template <class Op, class... Vals>
  static void apply(std::uint64_t i, T& element, Vals... copies) {
    Op{}(i, element, copies...);
  }
  // Whether dest's process is known dead (an atomic load until some process failed).
  bool owner_failed(thread_id dest) const noexcept {
    const fabric::runtime& rt = self_.rt();
    return rt.failure_epoch() != 0 && rt.peer_failed(rt.process_of_thread(dest));
  }
  // One call carrying a segment of packed (slot, vals...) entries for Op to `dest`.
  template <class Op, class... Vals>
  static call_status send_packed(void* object, thread_id dest,
                                 std::span<const std::byte> entries) {
    array& a = *static_cast<array*>(object);
    const std::uint32_t id = a.registration_.id();
    return invoke::call_buffer<C, Policy>(
        a.self_, dest,
        [id](thread_context& s, std::span<std::byte> bytes) {
          if (array* part = detail::containers_of(s).template find<array>(id)) {
            part->template apply_packed<Op, Vals...>(bytes);
          }
        },
        entries);
  }
  // Applies every (slot, vals...) entry of `bytes` in order. The bytes were written by
  // send_packed's sender; a slot past this part (never written so) is skipped, not applied.
  template <class Op, class... Vals>
  void apply_packed(std::span<const std::byte> bytes) {
    constexpr std::size_t entry_size = sizeof(std::uint64_t) + (sizeof(Vals) + ... + 0);
    for (std::size_t at = 0; at + entry_size <= bytes.size(); at += entry_size) {
      std::uint64_t slot = 0;
      std::memcpy(&slot, bytes.data() + at, sizeof slot);
      std::tuple<Vals...> values;
      std::size_t offset = at + sizeof slot;
      std::apply([&](Vals&... v) { ((std::memcpy(&v, bytes.data() + offset, sizeof v),
                                      offset += sizeof v), ...); },
                 values);
      if (slot >= local_.size()) continue;
      std::apply([&](Vals&... v) { Op{}(index_of(self_.id(), slot), local_[slot], v...); },
                 values);
    }
  }

  // Where index i lives: its owner and its slot in the owner's part, with one division (by a
  // multiplication: a divider).
  struct place {
    thread_id owner;
    std::size_t slot;
  };
  place locate(std::uint64_t i) const noexcept {
    if (how_ == distribution::cyclic) {
      const std::uint64_t round = by_workers_.quotient(i);
      return {static_cast<thread_id>(i - round * workers_), static_cast<std::size_t>(round)};
    }
    if (i < in_long_) {  // the first extra_ blocks hold base_ + 1 indexes each
      const std::uint64_t t = by_long_.quotient(i);
      return {static_cast<thread_id>(t), static_cast<std::size_t>(i - t * (base_ + 1))};
    }
    const std::uint64_t beyond = i - in_long_, t = by_base_.quotient(beyond);  // base_ >= 1 here
    return {static_cast<thread_id>(extra_ + t), static_cast<std::size_t>(beyond - t * base_)};
  }
  std::size_t slot_of(std::uint64_t i) const noexcept { return locate(i).slot; }
  void check(std::uint64_t i) const {
    if (i >= size_) {
      throw error("containers::array: index " + std::to_string(i) + " is past the end (size " +
                  std::to_string(size_) + ")");
    }
  }
  static array& part_of(thread_context& s, std::uint32_t id) {
    return detail::part_of<array>(s, id, kind_name);
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
    (void)batches_.flush(this, dest);  // what was packed for dest goes first
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
  std::uint64_t base_;     // size_ / workers_: every part holds base_ or base_ + 1 indexes
  std::uint64_t extra_;    // size_ % workers_: the parts of workers 0..extra_ - 1 hold one more
  std::uint64_t in_long_;  // block: the indexes of those longer parts, 0..in_long_ - 1
  divider by_workers_;     // / workers_ (cyclic)
  divider by_long_;        // / (base_ + 1) (block, the longer parts)
  divider by_base_;        // / base_ (block, the others; base_ 0 leaves none)
  std::vector<T> local_;
  detail::packed_batches batches_;
  detail::registration<array> registration_;  // last: made after, and gone before, the rest
};

}  // namespace seriema::containers
