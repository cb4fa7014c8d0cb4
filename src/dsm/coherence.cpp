// The floating-home protocol: blocks brought in (a fast read from the last releaser, else from
// the home), twinned at their first write, merged at a release into the master copy, which moves
// here; write notices published at a barrier and applied as the acquire. docs/shared-memory.md.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <optional>
#include <seriema/base/error.hpp>
#include <seriema/fabric/runtime.hpp>
#include <stdexcept>

#include <seriema/dsm/detail/merge.hpp>
#include "coherence.hpp"

namespace seriema::dsm {

namespace detail {

namespace {

/// The space a thread is inside (a call it serves while waiting must not use it: the space's
/// lock is held).
thread_local const void* inside_space = nullptr;

}  // namespace

entry_guard::entry_guard(const void* s) {
  if (inside_space == s) {
    throw error("dsm: a call run while this thread waited inside a space used the same space "
                "(a space's operations do not nest)");
  }
  saved_ = inside_space;
  inside_space = s;
}

entry_guard::~entry_guard() { inside_space = saved_; }

void throw_lost(std::uint64_t b, int rank, const char* how) {
  throw block_lost(fmt::format("dsm: block {} is lost: rank {} {}; its master copy is gone and "
                               "no stale copy is returned",
                               b, rank, how),
                   b, rank);
}

void throw_deadline(const std::string& what) {
  throw deadline_error(fmt::format("dsm: {} past the deadline", what));
}

}  // namespace detail

namespace {

using detail::throw_deadline;
using detail::throw_lost;
using fabric::detail::atomic_op;
using fabric::detail::publish_status;
using detail::block_word;

std::uint64_t load_sequence(std::uint64_t* word) noexcept {
  return std::atomic_ref<std::uint64_t>(*word).load(std::memory_order_acquire);
}

/// Marks block b of this process's public copy as being rewritten (odd sequence) or done with
/// `version`. Owner: the process holding b's lock.
void begin_rewrite(std::uint64_t* sequence) noexcept {
  std::atomic_ref<std::uint64_t>(*sequence).store(load_sequence(sequence) | 1,
                                                  std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
}
void end_rewrite(std::uint64_t* sequence, std::uint32_t version) noexcept {
  std::atomic_ref<std::uint64_t>(*sequence).store(std::uint64_t{version} * 2,
                                                  std::memory_order_release);
}

/// The sequence word of block b in a peer's public copy.
std::optional<std::uint64_t> peer_sequence(detail::space_state& s,
                                           fabric::detail::region_publisher& pub,
                                           std::uint64_t b, deadline_clock::time_point deadline) {
  const std::uint64_t offset = s.layout.sequence_offset(b);
  if (pub.direct() != nullptr) {
    if (pub.peer_dead()) return std::nullopt;
    return load_sequence(reinterpret_cast<std::uint64_t*>(pub.direct() + offset));
  }
  std::uint64_t value = 0;
  const publish_status got =
      pub.fetch({reinterpret_cast<std::byte*>(&value), sizeof value}, offset, deadline);
  if (got == publish_status::peer_failed) return std::nullopt;
  if (got == publish_status::deadline_exceeded) throw_deadline("a block's sequence word");
  if (got != publish_status::ok) {
    throw error(fmt::format("dsm: the transport refused a get from rank {}", pub.process()));
  }
  return value;
}

/// Copies block b of `process`'s public copy into the private copy, consistently (its sequence
/// word even and equal before and after the get); the version it holds, or nullopt when the
/// process is dead.
std::optional<std::uint32_t> fetch_consistent(detail::space_state& s, fabric::thread_context& self,
                                              int process, std::uint64_t b,
                                              deadline_clock::time_point deadline) {
  fabric::detail::region_publisher& pub = *s.peer(self, process).public_copy;
  const std::span<std::byte> into{s.private_block(b), s.layout.block_bytes};
  for (;;) {
    const auto before = peer_sequence(s, pub, b, deadline);
    if (!before) return std::nullopt;
    if (*before % 2 == 0) {
      const publish_status got = pub.fetch(into, b * s.layout.block_bytes, deadline);
      if (got == publish_status::peer_failed) return std::nullopt;
      if (got == publish_status::deadline_exceeded) throw_deadline("a block's get");
      if (got != publish_status::ok) {
        throw error(fmt::format("dsm: the transport refused a get from rank {}", process));
      }
      std::atomic_thread_fence(std::memory_order_acquire);
      const auto after = peer_sequence(s, pub, b, deadline);
      if (!after) return std::nullopt;
      if (*after == *before) return static_cast<std::uint32_t>(*before / 2);
    }
    if (deadline_clock::now() >= deadline) {
      throw_deadline(fmt::format("block {} of rank {} stayed in rewrite", b, process));
    }
    (void)self.poll();  // its owner is merging it: a short wait
  }
}

/// The word at `offset` of block b's manager (its block or lease word), read atomically.
std::uint64_t load_manager_word(detail::space_state& s, fabric::thread_context& self,
                                std::uint64_t b, std::uint64_t offset, const char* what,
                                deadline_clock::time_point deadline) {
  const int manager = s.layout.manager_of(b);
  const fabric::atomic_result r =
      s.peer(self, manager).words->execute(atomic_op::fetch_add, offset, 0, 0, deadline);
  if (r.how == fabric::outcome::deadline_exceeded) throw_deadline(fmt::format("{}'s read", what));
  if (!r.ok()) throw_lost(b, manager, "(its manager) does not answer");
  return r.value;
}

/// Block b's word at its manager, read atomically.
block_word load_word(detail::space_state& s, fabric::thread_context& self, std::uint64_t b,
                     deadline_clock::time_point deadline) {
  return block_word::decode(
      load_manager_word(s, self, b, s.layout.block_word_offset(b), "a block word", deadline));
}

/// Block b's private copy now holds version v: it is valid (true) when that is at least
/// `at_least` (the version its newest notice named, or newer); `route` counts the fetch's source.
bool took(detail::space_state& s, std::uint64_t b, std::uint32_t v, std::uint32_t at_least,
          std::uint64_t& route) {
  detail::block_state& st = s.blocks[b];
  if (v < at_least) return false;
  st.valid = true;
  st.renewable = false;
  st.version = v;
  st.lease_end = v;  // no later version is at or below its own
  ++s.counters.fetches;
  ++route;
  return true;
}

/// Throws deadline_error past the deadline of a wait for version `at_least` (or newer) of b.
void check_version_deadline(std::uint64_t b, std::uint32_t at_least,
                            deadline_clock::time_point deadline) {
  if (deadline_clock::now() >= deadline) {
    throw_deadline(fmt::format("block {}'s version {} or newer", b, at_least));
  }
}

void check_fetch_deadline(const detail::space_state& s, std::uint64_t b,
                          deadline_clock::time_point deadline) {
  check_version_deadline(b, s.blocks[b].wanted, deadline);
}

std::uint64_t bit_of(int process) noexcept { return std::uint64_t{1} << process; }

/// Block b's directory word at its manager, read atomically (fixed home).
fabric::atomic_result load_directory(detail::space_state& s, fabric::thread_context& self,
                                     std::uint64_t b, deadline_clock::time_point deadline) {
  return s.peer(self, s.layout.manager_of(b))
      .words->execute(atomic_op::fetch_add, s.layout.directory_offset(b), 0, 0, deadline);
}

/// Sets (`member`) or clears this process's bit in block b's directory word at its manager (fixed
/// home: a join or a leave). Compare-and-swap from the word as read, so an operation repeated or
/// left in doubt by a deadline never disturbs another bit.
void change_directory(detail::space_state& s, fabric::thread_context& self, std::uint64_t b,
                      bool member, deadline_clock::time_point deadline) {
  const int manager = s.layout.manager_of(b);
  fabric::detail::remote_words& words = *s.peer(self, manager).words;
  const std::uint64_t offset = s.layout.directory_offset(b);
  const std::uint64_t bit = bit_of(s.rank);
  fabric::atomic_result r = load_directory(s, self, b, deadline);
  while (r.ok()) {
    const std::uint64_t wanted = member ? r.value | bit : r.value & ~bit;
    if (wanted == r.value) break;
    const std::uint64_t seen = r.value;
    r = words.execute(atomic_op::compare_swap, offset, wanted, seen, deadline);
    if (r.ok() && r.value == seen) break;
  }
  if (r.how == fabric::outcome::deadline_exceeded) throw_deadline("a directory update");
  if (!r.ok()) throw_lost(b, manager, "(its home) does not answer");
  ++s.counters.directory_updates;
}

/// Copies block b of this process's own public copy into the private copy, consistently (a
/// fixed home's public copy is rewritten by remote releasers' puts).
std::uint32_t copy_own_consistent(detail::space_state& s, fabric::thread_context& self,
                                  std::uint64_t b, deadline_clock::time_point deadline) {
  std::uint64_t* sequence = s.sequence_word(b);
  for (;;) {
    const std::uint64_t before = load_sequence(sequence);
    if (before % 2 == 0) {
      std::memcpy(s.private_block(b), s.public_block(b), s.layout.block_bytes);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (load_sequence(sequence) == before) return static_cast<std::uint32_t>(before / 2);
    }
    if (deadline_clock::now() >= deadline) {
      throw_deadline(fmt::format("block {} stayed in rewrite by a remote releaser", b));
    }
    (void)self.poll();
  }
}

/// Fixed home: joins b's sharers (when this process left them), then reads b from its home.
void fetch_from_fixed_home(detail::space_state& s, fabric::thread_context& self,
                           std::uint64_t b, deadline_clock::time_point deadline) {
  detail::block_state& st = s.blocks[b];
  if (!st.sharer) {  // before the get: a release after it sees this process in the directory
    change_directory(s, self, b, true, deadline);
    st.sharer = true;
  }
  const int home = s.layout.manager_of(b);
  for (;;) {
    std::optional<std::uint32_t> v;
    if (home == s.rank) {
      v = copy_own_consistent(s, self, b, deadline);
    } else {
      v = fetch_consistent(s, self, home, b, deadline);
      if (!v) throw_lost(b, home, "(its home) died");
    }
    if (took(s, b, *v, st.wanted, s.counters.home_reads)) return;
    check_fetch_deadline(s, b, deadline);
    (void)self.poll();
  }
}

/// Brings invalid block b up to `at_least` (the version its write notice named, or newer): a
/// fast read from the releaser the notice named when that is enough, else from the home.
void fetch_copy(detail::space_state& s, fabric::thread_context& self, std::uint64_t b,
                std::uint32_t at_least, deadline_clock::time_point deadline) {
  detail::block_state& st = s.blocks[b];
  if (s.fixed_home) {
    fetch_from_fixed_home(s, self, b, deadline);
    return;
  }
  if (st.releaser >= 0 && st.releaser != s.rank && at_least <= st.wanted) {
    const auto v = fetch_consistent(s, self, st.releaser, b, deadline);
    if (v && took(s, b, *v, at_least, s.counters.fast_reads)) return;
  }
  for (;;) {  // from the home the block word names (it may move while we read)
    const block_word w = load_word(s, self, b, deadline);
    std::optional<std::uint32_t> v;
    if (w.home == 0) {
      std::memset(s.private_block(b), 0, s.layout.block_bytes);
      v = 0;
    } else if (static_cast<int>(w.home - 1) == s.rank) {  // only this process rewrites it
      std::memcpy(s.private_block(b), s.public_block(b), s.layout.block_bytes);
      v = static_cast<std::uint32_t>(load_sequence(s.sequence_word(b)) / 2);
    } else {
      v = fetch_consistent(s, self, static_cast<int>(w.home - 1), b, deadline);
      if (!v) throw_lost(b, static_cast<int>(w.home - 1), "(its home) died");
    }
    if (took(s, b, *v, at_least, s.counters.home_reads)) {
      if (*v > st.wanted && w.home != 0) {  // what a notice of it names from now on
        st.wanted = *v;
        st.releaser = static_cast<int>(w.home - 1);
      }
      return;
    }
    check_version_deadline(b, at_least, deadline);
    (void)self.poll();  // a release of it is under way
  }
}

/// Block b's lease word at its manager, read atomically.
detail::lease_word load_lease(detail::space_state& s, fabric::thread_context& self,
                              std::uint64_t b, deadline_clock::time_point deadline) {
  return detail::lease_word::decode(
      load_manager_word(s, self, b, s.layout.lease_offset(b), "a lease word", deadline));
}

/// Compare-and-swap of a word of block b's manager; returns what the word held.
std::uint64_t swap_manager_word(detail::space_state& s, fabric::thread_context& self,
                                std::uint64_t b, std::uint64_t offset, std::uint64_t desired,
                                std::uint64_t expected, deadline_clock::time_point deadline) {
  const int manager = s.layout.manager_of(b);
  const fabric::atomic_result r = s.peer(self, manager).words->execute(
      atomic_op::compare_swap, offset, desired, expected, deadline);
  if (r.how == fabric::outcome::deadline_exceeded) {
    throw_deadline(fmt::format("a compare-and-swap of block {}'s words", b));
  }
  if (!r.ok()) throw_lost(b, manager, "(its manager) does not answer");
  return r.value;
}

/// What a lease registration found.
struct registration {
  enum { registered, superseded, busy } result;
  std::uint32_t version;  ///< the block's version when superseded
  std::uint32_t locker;   ///< the locking process + 1 when busy (0: the unlock is on its way)
};

/// Registers a lease on block b's copy (floating home with leases) reaching the acquired floor,
/// and `lease` ticks past it for a read (a copy about to be written is merged with the current
/// master at its release anyway, and a longer lease would only push that release's version up),
/// so that the copy stays valid through every floor up to there:
///  1. sets `leased` in the block word while the copy's version is current and unlocked
///     (skipped when an earlier registration of this version saw it set);
///  2. raises the lease word's end (compare-and-swap from the word as last seen);
///  3. reads the block word again: unlocked at the same version, the copy's lease_end is set.
/// A release that locks after 3 finds `leased` (set in 1, cleared only by a release's unlock,
/// which also changes the version) and takes a version past the end raised in 2; one that locked
/// before 3 is seen there (`busy`, or `superseded` once it unlocked), whatever it did to the
/// lease word.
registration register_lease(detail::space_state& s, fabric::thread_context& self,
                            std::uint64_t b, bool for_write,
                            deadline_clock::time_point deadline) {
  detail::block_state& st = s.blocks[b];
  const std::uint32_t v = st.version;
  const auto target = static_cast<std::uint32_t>(std::min<std::uint64_t>(
      std::uint64_t{std::max(v, s.acquired_floor)} + (for_write ? 0 : s.lease), 0xffffffffu));
  // The word older than the copy: a fast read got the releaser's version before its unlock
  // landed, so the copy is current once it does.
  const auto seen = [&](const block_word& w) -> std::optional<registration> {
    if (w.version > v) return registration{registration::superseded, w.version, 0};
    if (w.version < v || w.locker != 0) return registration{registration::busy, v, w.locker};
    return std::nullopt;
  };
  const std::uint64_t block_offset = s.layout.block_word_offset(b);
  for (block_word w = st.seen_leased == v + 1 ? block_word{0, 0, v, true}
                                              : load_word(s, self, b, deadline);;) {
    if (const auto r = seen(w)) return *r;
    if (w.leased) break;
    block_word flagged = w;
    flagged.leased = true;
    const std::uint64_t was =
        swap_manager_word(s, self, b, block_offset, flagged.encode(), w.encode(), deadline);
    w = was == w.encode() ? flagged : block_word::decode(was);
  }
  detail::lease_word lw = st.seen_leased == v + 1 ? detail::lease_word::decode(st.seen_lease_word)
                                                  : load_lease(s, self, b, deadline);
  st.seen_leased = v + 1;
  for (;;) {
    const detail::lease_word raised{std::max(lw.version, v), std::max(lw.end, target)};
    if (raised.encode() == lw.encode()) break;
    const std::uint64_t was = swap_manager_word(s, self, b, s.layout.lease_offset(b),
                                                raised.encode(), lw.encode(), deadline);
    if (was == lw.encode()) {
      lw = raised;
      break;
    }
    lw = detail::lease_word::decode(was);
  }
  st.seen_lease_word = lw.encode();
  if (const auto r = seen(load_word(s, self, b, deadline))) return *r;
  st.lease_end = lw.end;
  return {registration::registered, v, 0};
}

/// Registers a lease on block b's current copy, waiting while a release of it is under way;
/// nullopt when registered, else the newer version that superseded the copy.
std::optional<std::uint32_t> lease_or_newer(detail::space_state& s, fabric::thread_context& self,
                                            std::uint64_t b, bool for_write,
                                            deadline_clock::time_point deadline) {
  for (;;) {
    const registration r = register_lease(s, self, b, for_write, deadline);
    if (r.result == registration::registered) return std::nullopt;
    if (r.result == registration::superseded) return r.version;
    if (r.locker != 0 && s.rt.peer_failed(static_cast<int>(r.locker - 1))) {
      throw_lost(b, static_cast<int>(r.locker - 1), "died holding its lock");
    }
    check_fetch_deadline(s, b, deadline);
    (void)self.poll();  // a release under way: it may yet fail and leave our version current
  }
}

/// Brings invalid block b up to the version its write notice named and, with leases, to a
/// version no older than any release the acquired floor covers.
void fetch_block(detail::space_state& s, fabric::thread_context& self, std::uint64_t b,
                 bool for_write, std::uint32_t at_least, deadline_clock::time_point deadline) {
  // A fault-driven space's invalid block stays inaccessible to the application while it is
  // written through the protocol's view, and is left as its state says however this ends.
  struct reprotect {
    detail::space_state& s;
    std::uint64_t b;
    ~reprotect() { detail::protect_block(s, b); }
  } after{s, b};
  detail::block_state& st = s.blocks[b];
  for (;;) {
    fetch_copy(s, self, b, at_least, deadline);
    if (st.lease_end >= s.acquired_floor) return;
    // Older than the floor (a fast read, or a release since): current, or fetch the newer one.
    const auto newer = lease_or_newer(s, self, b, for_write, deadline);
    if (!newer) return;
    st.valid = false;
    at_least = *newer;
    check_version_deadline(b, at_least, deadline);
  }
}

/// Makes block b, whose lease ended, valid again: its lease renewed at the manager when its
/// version is still current (no get), else the newer version fetched.
void renew_or_fetch(detail::space_state& s, fabric::thread_context& self, std::uint64_t b,
                    bool for_write, deadline_clock::time_point deadline) {
  detail::block_state& st = s.blocks[b];
  st.renewable = false;
  const auto newer = lease_or_newer(s, self, b, for_write, deadline);
  if (!newer) {
    st.valid = true;
    ++s.counters.lease_renewals;
    detail::protect_block(s, b);
    return;
  }
  fetch_block(s, self, b, for_write, std::max(st.wanted, *newer), deadline);
}

void make_twin(detail::space_state& s, std::uint64_t b) {
  std::vector<std::byte> twin;
  if (!s.spare_twins.empty()) {
    twin = std::move(s.spare_twins.back());
    s.spare_twins.pop_back();
  }
  twin.resize(s.layout.block_bytes);
  std::memcpy(twin.data(), s.private_block(b), s.layout.block_bytes);
  s.twins[b] = std::move(twin);
  s.dirty.push_back(b);
  s.blocks[b].dirty = true;
  ++s.counters.twins;
  detail::protect_block(s, b);
}

/// Locks block b's word; returns it as it was (unlocked). Each compare-and-swap guesses the
/// word: first from what this process knows (the newest notice's version and releaser), then
/// from what the last attempt returned (a holder's release will make it the home of the next
/// version, often one past the current). A right guess costs one remote atomic; a wrong one
/// (also one that missed a `leased` bit, or a version a lease pushed further) returns the word
/// to guess next.
block_word lock_block(detail::space_state& s, fabric::thread_context& self, std::uint64_t b,
                      deadline_clock::time_point deadline) {
  fabric::detail::remote_words& words = *s.peer(self, s.layout.manager_of(b)).words;
  const std::uint64_t offset = s.layout.block_word_offset(b);
  const detail::block_state& st = s.blocks[b];
  // A fixed home's word names the manager once the block was released.
  const auto fixed = static_cast<std::uint32_t>(s.layout.manager_of(b) + 1);
  const auto home_guess = [&](std::uint32_t version, std::uint32_t releaser) -> std::uint32_t {
    if (!s.fixed_home) return releaser;
    return version == 0 ? 0 : fixed;
  };
  block_word guess{0,
                   home_guess(st.wanted, st.releaser >= 0
                                             ? static_cast<std::uint32_t>(st.releaser + 1)
                                             : 0),
                   st.wanted};
  for (;;) {
    block_word locked = guess;
    locked.locker = static_cast<std::uint32_t>(s.rank + 1);
    const fabric::atomic_result r =
        words.execute(atomic_op::compare_swap, offset, locked.encode(), guess.encode(), deadline);
    if (r.how == fabric::outcome::deadline_exceeded) throw_deadline("a block lock");
    if (!r.ok()) throw_lost(b, s.layout.manager_of(b), "(its manager) does not answer");
    if (r.value == guess.encode()) return guess;
    const block_word current = block_word::decode(r.value);
    if (current.locker == 0) {  // free: only the guess was wrong
      guess = current;
      continue;
    }
    if (s.rt.peer_failed(static_cast<int>(current.locker - 1))) {
      throw_lost(b, static_cast<int>(current.locker - 1), "died holding its lock");
    }
    ++s.counters.lock_retries;
    if (deadline_clock::now() >= deadline) {
      throw_deadline(fmt::format("block {}'s lock (held by rank {})", b,
                                 static_cast<int>(current.locker) - 1));
    }
    guess = {0, home_guess(current.version + 1, current.locker), current.version + 1};
    (void)self.poll();
  }
}

/// Stores `w` (unlocked) as block b's word.
void unlock_block(detail::space_state& s, fabric::thread_context& self, std::uint64_t b,
                  block_word w) {
  w.locker = 0;
  // Bounded even without a deadline: the lock must not stay held because this wait gave up.
  const fabric::atomic_result r = s.peer(self, s.layout.manager_of(b)).words->execute(
      atomic_op::swap, s.layout.block_word_offset(b), w.encode(), 0,
      deadline_clock::now() + std::chrono::seconds(30), false);
  if (!r.ok()) throw_lost(b, s.layout.manager_of(b), "(its manager) did not take the unlock");
}

/// Puts the master copy of block b (locked, as `w` says) into this process's public copy.
void take_master(detail::space_state& s, fabric::thread_context& self, std::uint64_t b,
                 const block_word& w, deadline_clock::time_point deadline) {
  std::byte* master = s.public_block(b);
  if (w.home == 0) {  // never released: all zeros
    std::memset(master, 0, s.layout.block_bytes);
    ++s.counters.migrations;
    return;
  }
  const int home = static_cast<int>(w.home - 1);
  if (home == s.rank) {
    ++s.counters.local_merges;
    return;
  }
  // The home's copy is stable: only its process rewrites it, under the lock we hold.
  const publish_status got = s.peer(self, home).public_copy->fetch(
      {master, s.layout.block_bytes}, b * s.layout.block_bytes, deadline);
  if (got == publish_status::ok) {
    ++s.counters.migrations;
    return;
  }
  // What the public copy holds now is neither ours nor the master: version 0 sends any reader
  // elsewhere (no notice names version 0 of a released block).
  end_rewrite(s.sequence_word(b), 0);
  unlock_block(s, self, b, w);
  if (got == publish_status::deadline_exceeded) throw_deadline("a master copy's get");
  throw_lost(b, home, "(its home) died");
}

/// Fixed home: puts merged block b (this process's public copy) into its home's public copy
/// under the home's sequence word (odd, the block, then 2 x `version`), each publication drained
/// before the next. Over write messages a drain means sent, not applied: the directory read that
/// follows (an atomic on the same endpoint, answered after the home applied what came before it)
/// is what orders the block before the unlock. When the first publication was refused (nothing
/// sent) b is unlocked as it was (`w`); once anything went out, b stays locked (the home may
/// hold a half-written block, which no reader accepts: its word is odd) and later lockers end by
/// their deadlines naming this process. Throws either way.
void write_home(detail::space_state& s, fabric::thread_context& self, std::uint64_t b,
                const block_word& w, std::uint32_t version, deadline_clock::time_point deadline) {
  const int home = s.layout.manager_of(b);
  fabric::detail::region_publisher& pub = *s.peer(self, home).public_copy;
  const std::uint64_t sequence = s.layout.sequence_offset(b);
  const std::span<const std::byte> block{s.public_block(b), s.layout.block_bytes};
  publish_status put = pub.publish({}, 0, sequence, 2 * std::uint64_t{w.version} + 1);
  if (put != publish_status::ok) unlock_block(s, self, b, w);  // nothing was sent
  // The odd word is in place before any byte of the block (a reader retries meanwhile).
  std::atomic_thread_fence(std::memory_order_release);
  if (put == publish_status::ok && !pub.drain(deadline)) put = publish_status::peer_failed;
  if (put == publish_status::ok) put = pub.publish(block, b * s.layout.block_bytes, sequence,
                                                   2 * std::uint64_t{version});
  if (put == publish_status::ok && !pub.drain(deadline)) put = publish_status::peer_failed;
  if (put == publish_status::ok) {
    ++s.counters.home_writes;
    return;
  }
  if (put == publish_status::deadline_exceeded ||
      (!pub.peer_dead() && deadline_clock::now() >= deadline)) {
    throw_deadline(fmt::format("block {}'s merged copy's put to its home, rank {}", b, home));
  }
  throw_lost(b, home, "(its home) died or refused the merged block");
}

/// Fixed home: the processes block b's directory names, read after the merged block reached the
/// home (a process that joins later reads it). When the read fails every other process is named:
/// the release has happened, and telling too many is safe.
std::uint64_t read_directory(detail::space_state& s, fabric::thread_context& self,
                             std::uint64_t b, deadline_clock::time_point deadline) {
  const fabric::atomic_result r = load_directory(s, self, b, deadline);
  return r.ok() ? r.value : ~std::uint64_t{0};
}

/// The head word of the release log of the epoch this process is in.
std::uint64_t* log_head(detail::space_state& s) noexcept {
  return s.meta_word(s.layout.log_offset(s.epoch % 2));
}

/// Records block b's release (noticed, at its notice index) in the release log: the entry, then
/// the head word with the count, each one atomic store, so a peer's get of the head and then of
/// the entries it counts reads whole entries, at this or a newer version.
void log_release(detail::space_state& s, std::uint64_t b) noexcept {
  const detail::block_state& st = s.blocks[b];
  std::uint64_t* head = log_head(s);
  std::atomic_ref<std::uint64_t>(head[1 + st.notice_index])
      .store((b << 32) | st.version, std::memory_order_relaxed);
  std::atomic_ref<std::uint64_t>(*head).store((s.epoch << 32) | s.notices.size(),
                                              std::memory_order_release);
}

/// The version block b's release takes (b locked, its word as `w` was): after the current one,
/// at or above the floor this process acquired (so its own copy holds through it), and past
/// every lease registered on the current version: when the word says `leased`, the lease word is
/// swapped to the new version (a renewal racing with it then fails, or is seen here).
std::uint32_t next_version(detail::space_state& s, fabric::thread_context& self, std::uint64_t b,
                           const block_word& w, deadline_clock::time_point deadline) {
  // Versions stay at most 2^32 - lease - 2, so that no lease end or version past one wraps.
  const std::uint64_t most = 0xffffffffu - std::uint64_t{s.lease} - 2;
  const auto checked = [&](std::uint64_t version) {
    if (version > most) {
      throw error(fmt::format("dsm: block {}'s logical time would pass {} (2^32 - lease - 2); a "
                              "space takes at most that many releases of a block",
                              b, most));
    }
    return static_cast<std::uint32_t>(version);
  };
  const std::uint64_t version =
      std::max(std::uint64_t{w.version} + 1, std::uint64_t{s.acquired_floor});
  if (!w.leased) return checked(version);
  detail::lease_word lw = load_lease(s, self, b, deadline);
  for (;;) {
    const std::uint32_t past = checked(
        std::max({version, std::uint64_t{lw.version} + 1, std::uint64_t{lw.end} + 1}));
    const detail::lease_word closed{past, past};
    const std::uint64_t was = swap_manager_word(s, self, b, s.layout.lease_offset(b),
                                                closed.encode(), lw.encode(), deadline);
    if (was == lw.encode()) return past;
    lw = detail::lease_word::decode(was);
  }
}

/// Merges dirty block b into its master copy, which becomes this process's public copy.
void release_block(detail::space_state& s, fabric::thread_context& self, std::uint64_t b,
                   deadline_clock::time_point deadline) {
  // A store by another thread of the process from here on faults and waits for the state mutex
  // (fault-driven spaces): it lands after the merge, in a new interval, and is not lost.
  detail::seal_block(s, b);
  const block_word w = lock_block(s, self, b, deadline);
  std::uint32_t version = 0;
  try {
    version = next_version(s, self, b, w, deadline);
  } catch (...) {
    unlock_block(s, self, b, w);  // nothing changed but maybe the lease word (only forward)
    throw;
  }
  std::uint64_t* sequence = s.sequence_word(b);
  begin_rewrite(sequence);
  take_master(s, self, b, w, deadline);
  std::byte* master = s.public_block(b);
  std::byte* mine = s.private_block(b);
  auto twin = s.twins.find(b);
  detail::merge_changes(master, mine, twin->second.data(), s.layout.block_bytes);
  std::memcpy(mine, master, s.layout.block_bytes);  // the others' writes, released before ours
  end_rewrite(sequence, version);
  auto home = static_cast<std::uint32_t>(s.rank + 1);
  detail::block_state& st = s.blocks[b];
  if (s.fixed_home) {
    home = static_cast<std::uint32_t>(s.layout.manager_of(b) + 1);
    if (static_cast<int>(home - 1) != s.rank) write_home(s, self, b, w, version, deadline);
    st.tell |= read_directory(s, self, b, deadline) & ~bit_of(s.rank);
  }
  unlock_block(s, self, b, {0, home, version});

  st.version = version;
  st.wanted = version;
  st.lease_end = version;
  st.releaser = s.rank;
  st.valid = true;
  st.renewable = false;
  st.dirty = false;
  detail::protect_block(s, b);
  s.spare_twins.push_back(std::move(twin->second));
  s.twins.erase(twin);
  if (!st.noticed) {
    st.noticed = true;
    st.notice_index = static_cast<std::uint32_t>(s.notices.size());
    s.notices.push_back(b);
  }
  log_release(s, b);
  ++s.counters.releases;
}

/// The notices of this epoch that process q is told, as [count, (block << 32 | version)...] in
/// `out`: all of them (floating home), or those whose directory named q (fixed home).
void notices_for(detail::space_state& s, int q, std::vector<std::uint64_t>& out) {
  out.assign(1, 0);
  for (std::uint64_t b : s.notices) {
    const detail::block_state& st = s.blocks[b];
    if (s.fixed_home && (st.tell & bit_of(q)) == 0) continue;
    out.push_back((b << 32) | st.version);
  }
  out[0] = out.size() - 1;
}

/// Publishes this process's notices of epoch `epoch` into every peer's board.
void publish_notices(detail::space_state& s, fabric::thread_context& self, std::uint64_t epoch) {
  auto& sent = s.sent[epoch % 2];
  sent.resize(s.fixed_home ? s.layout.processes : 1);
  if (!s.fixed_home) notices_for(s, -1, sent[0]);
  for (int q = 0; s.fixed_home && q < static_cast<int>(s.layout.processes); ++q) {
    if (q != s.rank) notices_for(s, q, sent[static_cast<std::size_t>(q)]);
  }
  for (std::uint64_t b : s.notices) {
    s.blocks[b].noticed = false;
    s.blocks[b].tell = 0;
  }
  s.notices.clear();
  // The new epoch's log starts empty before any peer can leave this barrier and read it; the old
  // one stays whole for the peers still in the old epoch.
  std::atomic_ref<std::uint64_t>(*log_head(s)).store(epoch << 32, std::memory_order_release);
  const std::uint64_t slot = s.layout.slot_offset(epoch % 2, static_cast<std::uint64_t>(s.rank));
  for (int q = 0; q < static_cast<int>(s.layout.processes); ++q) {
    if (q == s.rank) continue;
    const std::vector<std::uint64_t>& out = sent[s.fixed_home ? static_cast<std::size_t>(q) : 0];
    const std::span<const std::byte> data{reinterpret_cast<const std::byte*>(out.data()),
                                          out.size() * sizeof(std::uint64_t)};
    const publish_status put = s.peer(self, q).board->publish(data, slot + 8, slot, epoch);
    if (put == publish_status::peer_failed) {
      throw error(fmt::format("dsm: barrier on rank {}: rank {} died", s.rank, q));
    }
    if (put == publish_status::deadline_exceeded) throw_deadline("a barrier's notices");
    if (put != publish_status::ok) {
      throw error(fmt::format("dsm: barrier on rank {}: the transport refused the notices to "
                              "rank {}",
                              s.rank, q));
    }
  }
}

/// Waits until every peer published its notices of `epoch` here.
void await_notices(detail::space_state& s, fabric::thread_context& self, std::uint64_t epoch,
                   deadline_clock::time_point deadline) {
  const auto arrived = [&](int q) {
    return q == s.rank ||
           load_sequence(s.meta_word(s.layout.slot_offset(epoch % 2, q))) == epoch;
  };
  const auto dead = [&] {
    for (int q = 0; q < static_cast<int>(s.layout.processes); ++q) {
      if (!arrived(q) && s.rt.peer_failed(q)) return q;
    }
    return -1;
  };
  const auto all = [&] {
    for (int q = 0; q < static_cast<int>(s.layout.processes); ++q) {
      if (!arrived(q)) return false;
    }
    return true;
  };
  self.wait_until([&] { return all() || dead() >= 0; }, deadline);
  if (const int q = dead(); q >= 0) {
    throw error(fmt::format("dsm: barrier {} on rank {}: rank {} died", epoch, s.rank, q));
  }
  if (!all()) {
    std::string missing;
    for (int q = 0; q < static_cast<int>(s.layout.processes); ++q) {
      if (!arrived(q)) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", q);
    }
    throw_deadline(fmt::format("barrier {} on rank {}: ranks {} had not arrived", epoch, s.rank,
                               missing));
  }
}

/// The acquire: each peer's notices of `epoch` invalidate older copies here.
void apply_notices(detail::space_state& s, fabric::thread_context& self, std::uint64_t epoch,
                   deadline_clock::time_point deadline) {
  for (int q = 0; q < static_cast<int>(s.layout.processes); ++q) {
    if (q == s.rank) continue;
    const std::uint64_t* slot = s.meta_word(s.layout.slot_offset(epoch % 2, q));
    const std::uint64_t count = slot[1];
    if (count > s.layout.blocks) {
      throw error(fmt::format("dsm: rank {} published {} notices for {} blocks", q, count,
                              s.layout.blocks));
    }
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::uint64_t b = slot[2 + i] >> 32;
      const auto version = static_cast<std::uint32_t>(slot[2 + i]);
      if (b >= s.layout.blocks) {
        throw error(fmt::format("dsm: rank {} published a notice of block {} of {}", q, b,
                                s.layout.blocks));
      }
      detail::apply_notice(s, self, b, version, q, deadline);
    }
    s.counters.barrier_notices += count;
  }
}

/// The process's part of a barrier, run by its last worker to arrive.
void exchange(detail::space_state& s, fabric::thread_context& self,
              deadline_clock::time_point deadline) {
  std::uint64_t epoch = 0;
  {
    std::lock_guard lock(s.mutex);
    detail::release_all(s, self, deadline);
    epoch = ++s.epoch;
    publish_notices(s, self, epoch);
  }
  await_notices(s, self, epoch, deadline);
  std::lock_guard lock(s.mutex);
  apply_notices(s, self, epoch, deadline);
  // Everything heard from hand-over records since the last barrier was some process's own
  // release, and every process has just published its own.
  for (std::uint64_t b : s.heard) s.blocks[b].heard = false;
  s.heard.clear();
  s.heard_everything = false;
  s.heard_floor = 0;
  ++s.counters.barriers;
}

/// Releases dirty block b, dropping it from the dirty list; on failure also its twin and copy.
void release_dirty(detail::space_state& s, fabric::thread_context& self, std::uint64_t b,
                   deadline_clock::time_point deadline) {
  s.dirty.erase(std::find(s.dirty.begin(), s.dirty.end(), b));
  try {
    release_block(s, self, b, deadline);
  } catch (...) {
    s.blocks[b].dirty = false;
    s.blocks[b].valid = false;
    s.twins.erase(b);
    detail::protect_block(s, b);
    throw;
  }
}

}  // namespace

void detail::release_all(space_state& s, fabric::thread_context& self,
                         deadline_clock::time_point deadline) {
  while (!s.dirty.empty()) release_dirty(s, self, s.dirty.front(), deadline);
}

void detail::prepare_blocks(space_state& s, fabric::thread_context& self, std::uint64_t first,
                            std::uint64_t last, bool for_write,
                            deadline_clock::time_point deadline) {
  for (std::uint64_t b = first; b <= last; ++b) {
    if (!s.blocks[b].valid && s.blocks[b].renewable) {
      renew_or_fetch(s, self, b, for_write, deadline);
    }
    if (!s.blocks[b].valid) fetch_block(s, self, b, for_write, s.blocks[b].wanted, deadline);
    if (for_write && !s.blocks[b].dirty) make_twin(s, b);
  }
}

void detail::apply_notice(space_state& s, fabric::thread_context& self, std::uint64_t b,
                          std::uint32_t version, int releaser,
                          deadline_clock::time_point deadline) {
  block_state& st = s.blocks[b];
  if (version > st.wanted) {
    st.wanted = version;
    st.releaser = releaser;
  }
  if (!st.valid && version > st.version) st.renewable = false;  // a newer one: fetch it
  if (!st.valid || st.version >= version) return;
  if (st.dirty) {
    release_dirty(s, self, b, deadline);  // takes the master, which holds `version` or newer
    return;
  }
  st.valid = false;
  ++s.counters.invalidations;
  protect_block(s, b);
  if (s.fixed_home && st.sharer) {  // after the drop: a later release need not tell us
    // Best effort: a bit left set only makes releasers tell this process more (and the next join
    // sets it again harmlessly); a throw here would leave the acquire's other notices unapplied.
    st.sharer = false;
    try {
      change_directory(s, self, b, false, deadline);
    } catch (const error&) {
    }
  }
}

void detail::apply_floor(space_state& s, fabric::thread_context& self, std::uint32_t floor,
                         deadline_clock::time_point deadline) {
  s.heard_floor = std::max(s.heard_floor, floor);
  if (floor <= s.acquired_floor) return;
  // Clean copies first (nothing can fail there), then the dirty ones' releases, under the new
  // floor (their versions reach it, so their own copies hold through it); when one fails the
  // floor goes back to where it was, so that the next acquire of it expires what is left.
  const std::uint32_t before = s.acquired_floor;
  std::vector<std::uint64_t> dirty;
  for (std::uint64_t b = 0; b < s.layout.blocks; ++b) {
    block_state& st = s.blocks[b];
    if (!st.valid) continue;
    if (st.lease_end >= floor) {
      ++s.counters.leases_held;
      continue;
    }
    ++s.counters.lease_expiries;
    if (st.dirty) {
      dirty.push_back(b);
      continue;
    }
    st.valid = false;
    st.renewable = true;
    protect_block(s, b);
  }
  s.acquired_floor = floor;
  try {
    for (std::uint64_t b : dirty) {
      if (s.blocks[b].valid && s.blocks[b].dirty) {
        release_dirty(s, self, b, deadline);  // the merge takes the current master
      }
    }
  } catch (...) {
    s.acquired_floor = before;
    throw;
  }
}

void space::prepare(fabric::thread_context& self, const void* p, std::size_t n, bool for_write,
                    deadline_clock::time_point deadline) {
  if (!contains(p, n)) {
    throw std::out_of_range(fmt::format("dsm: [{}, +{}) is not inside the space [{}, +{})", p, n,
                                        static_cast<const void*>(state_->base),
                                        state_->layout.bytes));
  }
  if (n == 0) return;
  detail::space_state& s = *state_;
  detail::entry_guard guard(&s);
  const auto offset = static_cast<std::uint64_t>(static_cast<const std::byte*>(p) - s.base);
  const std::uint64_t first = offset / s.layout.block_bytes;
  const std::uint64_t last = (offset + n - 1) / s.layout.block_bytes;
  std::lock_guard lock(s.mutex);
  detail::prepare_blocks(s, self, first, last, for_write, self.deadline_in_force(deadline));
}

void space::release(fabric::thread_context& self, deadline_clock::time_point deadline) {
  detail::space_state& s = *state_;
  detail::entry_guard guard(&s);
  deadline = self.deadline_in_force(deadline);
  std::lock_guard lock(s.mutex);
  detail::release_all(s, self, deadline);
}

void space::barrier(fabric::thread_context& self, deadline_clock::time_point deadline) {
  detail::space_state& s = *state_;
  detail::entry_guard guard(&s);
  deadline = self.deadline_in_force(deadline);
  const std::uint64_t generation = s.generation.load(std::memory_order_acquire);
  if (s.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == s.local_workers) {
    std::exception_ptr failure;
    try {
      exchange(s, self, deadline);
    } catch (...) {
      failure = std::current_exception();
    }
    s.failure = failure;
    s.arrived.store(0, std::memory_order_relaxed);
    s.generation.store(generation + 1, std::memory_order_release);
    if (failure) std::rethrow_exception(failure);
    return;
  }
  const bool passed = self.wait_until(
      [&] { return s.generation.load(std::memory_order_acquire) != generation; }, deadline);
  if (!passed) {
    throw_deadline(fmt::format("barrier on rank {}: the process's {} workers arriving",
                               s.rank, s.local_workers));
  }
  if (s.failure) std::rethrow_exception(s.failure);
}

}  // namespace seriema::dsm
