// Mutexes and acquire/release atomics of a space: a lock word at the object's manager, and a
// hand-over record in the meta region of the process that last handed the object over, carrying
// the write notices it knew (so an acquire reads what was released before, transitively) and,
// for an atomic, its value. docs/shared-memory.md "Mutexes and atomics".
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <seriema/base/error.hpp>
#include <seriema/fabric/runtime.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

#include "coherence.hpp"

namespace seriema::dsm {

namespace {

using detail::record_everything;
using detail::space_state;
using detail::sync_word;
using fabric::detail::atomic_op;
using fabric::detail::publish_status;

/// Entries a first get of a record brings (more take a second get).
constexpr std::uint64_t entries_in_first_get = 32;

/// A hand-over record as read by the acquirer.
struct handover {
  bool none = false;  ///< never handed over: no notices, value 0
  bool lost = false;  ///< its process died: notices and value are gone
  std::uint64_t epoch = 0;
  std::uint64_t count = 0;  ///< or record_everything
  std::uint64_t value = 0;
  std::uint32_t floor = 0;  ///< the newest version among the notices left out (leases)
  const std::uint64_t* entries = nullptr;  ///< count x ((block << 32 | version), releaser)
};

/// Words of a record before its entries: epoch, count, value, floor.
constexpr std::uint64_t record_header = 4;

std::string object_name(const space_state& s, std::uint64_t sync) {
  return sync < s.mutexes ? fmt::format("mutex {}", sync)
                          : fmt::format("atomic {}", sync - s.mutexes);
}

int process_of_thread(const space_state& s, std::uint32_t thread) {
  return s.rt.placement().locate(thread).process;
}

/// Sync object `sync`'s lock word at its manager, swapped for `desired` when it equals
/// `expected`; returns what it held, or nullopt at the deadline.
std::optional<sync_word> swap_word(space_state& s, fabric::thread_context& self,
                                   std::uint64_t sync, sync_word desired, sync_word expected,
                                   deadline_clock::time_point deadline, bool in_force) {
  const int manager = s.layout.manager_of(sync);
  const fabric::atomic_result r = s.peer(self, manager).words->execute(
      atomic_op::compare_swap, s.layout.sync_word_offset(sync), desired.encode(),
      expected.encode(), deadline, in_force);
  if (r.how == fabric::outcome::deadline_exceeded) return std::nullopt;
  if (!r.ok()) {
    throw error(fmt::format("dsm: {}'s manager, rank {}, does not answer ({})",
                            object_name(s, sync), manager, fabric::to_string(r.how)));
  }
  return sync_word::decode(r.value);
}

/// Throws when word `w` is held by a thread of a process that died (the object stays held for
/// ever); else returns a description of its holder for a deadline's message.
std::string check_holder(const space_state& s, std::uint64_t sync, sync_word w) {
  const int holder = process_of_thread(s, w.holder - 1);
  if (s.rt.peer_failed(holder)) {
    throw error(fmt::format("dsm: {} is held by thread {} of rank {}, which died holding it",
                            object_name(s, sync), w.holder - 1, holder));
  }
  return fmt::format(" (held by thread {} of rank {})", w.holder - 1, holder);
}

/// The pause of a wait for a held object, by attempts so far: poll, then yield, then sleep, so
/// that the holder runs on an oversubscribed machine.
void back_off(fabric::thread_context& self, std::uint64_t attempts) {
  (void)self.poll();
  if (attempts > 64) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  } else if (attempts > 8) {
    std::this_thread::yield();
  }
}

/// Takes sync object `sync` for this thread; returns the word as this thread holds it.
sync_word lock_sync(space_state& s, fabric::thread_context& self, std::uint64_t sync,
                    deadline_clock::time_point deadline) {
  sync_word guess = sync_word::decode(s.last_seen[sync].load(std::memory_order_relaxed));
  std::uint64_t retries = 0;
  std::string holder_seen;  // for the deadline's message
  for (;;) {
    const sync_word mine{static_cast<std::uint32_t>(self.id() + 1), guess.last, guess.handovers};
    const std::optional<sync_word> was = swap_word(s, self, sync, mine, guess, deadline, true);
    if (!was) detail::throw_deadline(fmt::format("{}{}", object_name(s, sync), holder_seen));
    if (was->encode() == guess.encode()) {
      s.last_seen[sync].store(guess.encode(), std::memory_order_relaxed);
      s.held[sync].store(mine.encode(), std::memory_order_relaxed);
      std::lock_guard lock(s.mutex);
      s.counters.lock_retries += retries;
      return mine;
    }
    if (was->holder == 0) {  // free, handed over by someone we did not guess
      guess = *was;
      continue;
    }
    holder_seen = check_holder(s, sync, *was);
    if (deadline_clock::now() >= deadline) {
      detail::throw_deadline(fmt::format("{}{}", object_name(s, sync), holder_seen));
    }
    // Its hand-over names its process and counts one more.
    guess = {0, static_cast<std::uint32_t>(process_of_thread(s, was->holder - 1) + 1),
             was->handovers + 1};
    back_off(self, ++retries);
  }
}

/// Frees sync object `sync` (held by this thread as `held`), naming `last` + 1 as the process
/// whose record is current; counts a hand-over when this holder `rewrote` the record (so that a
/// load_acquire that saw the word before and after its get knows the record did not change, and
/// holders that changed nothing, such as failed exchanges, do not disturb it). Bounded even
/// without a deadline: the object must not stay held because a wait gave up.
void unlock_sync(space_state& s, fabric::thread_context& self, std::uint64_t sync,
                 sync_word held, std::uint32_t last, bool rewrote) {
  s.held[sync].store(0, std::memory_order_relaxed);
  const sync_word freed{0, last, held.handovers + (rewrote ? 1 : 0)};
  const std::optional<sync_word> was =
      swap_word(s, self, sync, freed, held, deadline_clock::now() + std::chrono::seconds(30),
                false);
  if (!was) {
    throw error(fmt::format("dsm: {}'s manager, rank {}, took no unlock in 30 s",
                            object_name(s, sync), s.layout.manager_of(sync)));
  }
  if (was->encode() != held.encode()) {
    throw error(fmt::format("dsm: {}'s lock word changed while thread {} held it (0x{:x})",
                            object_name(s, sync), self.id(), was->encode()));
  }
}

/// The calling thread's buffer for records fetched from peers (a get that ran past its
/// deadline may still land in it).
std::vector<std::uint64_t>& record_buffer() {
  thread_local std::vector<std::uint64_t> buffer;
  return buffer;
}

handover decode_record(const space_state& s, const std::uint64_t* r, int process) {
  handover h{false, false, r[0], r[1], r[2], 0, r + record_header};
  if (h.count != record_everything && h.count > s.layout.record_notices) {
    throw error(fmt::format("dsm: rank {} handed over {} notices, more than a record holds ({})",
                            process, h.count, s.layout.record_notices));
  }
  if (r[3] > 0xffffffffu || (r[3] != 0 && s.lease == 0)) {
    throw error(fmt::format("dsm: rank {} handed over a floor of {} (leases {})", process, r[3],
                            s.lease == 0 ? "off" : "on"));
  }
  h.floor = static_cast<std::uint32_t>(r[3]);
  return h;
}

/// Gets [offset, + words) of `process`'s meta region into `into`; false when it died.
bool get_words(space_state& s, fabric::thread_context& self, int process, std::uint64_t offset,
               std::uint64_t* into, std::uint64_t words, deadline_clock::time_point deadline) {
  const publish_status got = s.peer(self, process).board->fetch(
      {reinterpret_cast<std::byte*>(into), words * 8}, offset, deadline);
  if (got == publish_status::peer_failed) return false;
  if (got == publish_status::deadline_exceeded) detail::throw_deadline("a hand-over record's get");
  if (got != publish_status::ok) {
    throw error(fmt::format("dsm: the transport refused a get from rank {}", process));
  }
  return true;
}

/// The record the word `held` names, copied into the calling thread's record buffer (stable when
/// this thread holds the object; else read_record_unlocked checks that nobody rewrote it).
handover read_record(space_state& s, fabric::thread_context& self, std::uint64_t sync,
                     sync_word held, deadline_clock::time_point deadline) {
  if (held.last == 0) return {true};
  const int process = static_cast<int>(held.last - 1);
  const std::uint64_t offset = s.layout.record_offset(sync);
  std::vector<std::uint64_t>& buffer = record_buffer();
  const std::uint64_t all = s.layout.record_bytes() / 8;
  buffer.resize(std::max<std::uint64_t>(buffer.size(), all));
  if (process == s.rank) {  // copied: another thread here may take the object and rewrite it
    std::lock_guard lock(s.mutex);  // which it does under this mutex (write_record)
    std::memcpy(buffer.data(), s.meta_word(offset), s.layout.record_bytes());
    return decode_record(s, buffer.data(), process);
  }
  const std::uint64_t first = std::min(all, record_header + 2 * entries_in_first_get);
  if (!get_words(s, self, process, offset, buffer.data(), first, deadline)) {
    return {false, true};
  }
  handover h = decode_record(s, buffer.data(), process);
  const std::uint64_t needed =
      record_header + (h.count == record_everything ? 0 : 2 * h.count);
  if (needed > first &&
      !get_words(s, self, process, offset + 8 * first, buffer.data() + first, needed - first,
                 deadline)) {
    return {false, true};
  }
  return h;
}

/// Sync object `sync`'s lock word, read atomically.
sync_word read_word(space_state& s, fabric::thread_context& self, std::uint64_t sync,
                    deadline_clock::time_point deadline) {
  const int manager = s.layout.manager_of(sync);
  const fabric::atomic_result r = s.peer(self, manager).words->execute(
      atomic_op::fetch_add, s.layout.sync_word_offset(sync), 0, 0, deadline);
  if (r.how == fabric::outcome::deadline_exceeded) {
    detail::throw_deadline(fmt::format("{}'s word", object_name(s, sync)));
  }
  if (!r.ok()) {
    throw error(fmt::format("dsm: {}'s manager, rank {}, does not answer ({})",
                            object_name(s, sync), manager, fabric::to_string(r.how)));
  }
  return sync_word::decode(r.value);
}

/// The record of `sync` as it stood at one instant, read without taking the object, so that
/// readers spinning on an atomic never hold off the thread that will store to it: the word free,
/// the record, the word again unchanged. A holder rewrites the record only between its lock and
/// its unlock, and the unlock counts one more hand-over, so an equal word means an untouched
/// record (a wrap of the 24-bit count within one get aside).
std::pair<sync_word, handover> read_record_unlocked(space_state& s, fabric::thread_context& self,
                                                    std::uint64_t sync,
                                                    deadline_clock::time_point deadline) {
  std::string holder_seen;  // for the deadline's message
  for (std::uint64_t attempts = 1;; ++attempts) {
    const sync_word before = read_word(s, self, sync, deadline);
    if (before.holder == 0) {
      const handover h = read_record(s, self, sync, before, deadline);
      if (h.none) return {before, h};  // never handed over: nothing to tear
      // The record's bytes (a get, or a copy of mapped memory) before the word's second read.
      std::atomic_thread_fence(std::memory_order_acquire);
      if (read_word(s, self, sync, deadline).encode() == before.encode()) {
        // (lost: its process died, and still holds the current record)
        s.last_seen[sync].store(before.encode(), std::memory_order_relaxed);
        return {before, h};
      }
    } else {
      holder_seen = check_holder(s, sync, before);
    }
    if (deadline_clock::now() >= deadline) {
      detail::throw_deadline(fmt::format("{}{}", object_name(s, sync), holder_seen));
    }
    back_off(self, attempts);
  }
}

/// Drops every copy this process holds (after releasing its writes): an acquire whose notices
/// did not fit or were lost.
void invalidate_everything(space_state& s, fabric::thread_context& self,
                           deadline_clock::time_point deadline) {
  detail::release_all(s, self, deadline);
  for (std::uint64_t b = 0; b < s.layout.blocks; ++b) {
    if (s.blocks[b].valid) {
      s.blocks[b].valid = false;
      ++s.counters.invalidations;
      detail::protect_block(s, b);
    }
  }
  s.heard_everything = true;
  ++s.counters.handover_overflows;
}

/// Remembers that an acquire learnt of block b's release: this process's hand-overs pass it on
/// until the next barrier (what was released before an acquire is read after every later acquire
/// down a chain of hand-overs).
void mark_heard(space_state& s, std::uint64_t b) {
  if (s.blocks[b].heard) return;
  s.blocks[b].heard = true;
  s.heard.push_back(b);
}

/// The acquire of a hand-over record (state mutex held).
void apply_record(space_state& s, fabric::thread_context& self, const handover& h,
                  deadline_clock::time_point deadline) {
  ++s.counters.acquires;
  if (h.none) return;
  if (!h.lost && h.epoch < s.epoch) return;  // a barrier since told everyone all of it
  if (h.epoch > s.epoch) {
    throw error(fmt::format("dsm: a hand-over record of barrier epoch {} reached rank {} at "
                            "epoch {}",
                            h.epoch, s.rank, s.epoch));
  }
  if (h.lost || h.count == record_everything) return invalidate_everything(s, self, deadline);
  if (h.floor != 0) detail::apply_floor(s, self, h.floor, deadline);
  for (std::uint64_t i = 0; i < h.count; ++i) {
    const std::uint64_t b = h.entries[2 * i] >> 32;
    const auto version = static_cast<std::uint32_t>(h.entries[2 * i]);
    const std::uint64_t releaser = h.entries[2 * i + 1];
    if (b >= s.layout.blocks || releaser >= s.layout.processes) {
      throw error(fmt::format("dsm: a hand-over record names block {} of rank {} ({} blocks, {} "
                              "processes)",
                              b, releaser, s.layout.blocks, s.layout.processes));
    }
    detail::apply_notice(s, self, b, version, static_cast<int>(releaser), deadline);
    mark_heard(s, b);
  }
  s.counters.handover_notices += h.count;
}

/// The notices this process's records carry, as (version << 32 | block) in `out`: its own
/// releases since the last barrier and the blocks it heard of, each once, at the newest version
/// it knows.
void gather_notices(const space_state& s, std::vector<std::uint64_t>& out) {
  out.clear();
  const auto add = [&](std::uint64_t b) {
    out.push_back((std::uint64_t{s.blocks[b].wanted} << 32) | b);
  };
  for (std::uint64_t b : s.notices) add(b);
  for (std::uint64_t b : s.heard) {
    if (!s.blocks[b].noticed) add(b);
  }
}

/// Keeps the `room` newest of `notices` (floating home with leases) and returns the floor: the
/// newest version among those left out, or the one heard before if newer. An acquirer treats every
/// copy older than the floor as possibly stale, so leaving the oldest out drops the fewest.
std::uint32_t truncate_notices(const space_state& s, std::vector<std::uint64_t>& notices,
                               std::uint64_t room) {
  std::uint32_t floor = s.heard_floor;
  if (notices.size() <= room) return floor;
  const auto kept = notices.begin() + static_cast<std::ptrdiff_t>(room);
  std::nth_element(notices.begin(), kept, notices.end(), std::greater<>());
  floor = std::max(floor, static_cast<std::uint32_t>(*kept >> 32));  // the newest left out
  notices.resize(room);
  return floor;
}

/// Writes this process's record of `sync`: every notice it knows since the last barrier (its
/// releases and what it heard) with the floor it heard; when they do not fit, the newest and a
/// floor (leases), or "everything" (no leases, or it heard "everything"); and `value`. State
/// mutex held; `sync` held by the calling thread, so no holder's get reads the record while it
/// changes (the next holder's get follows the unlock that follows these stores; load_acquire
/// checks the lock word around its get).
void write_record(space_state& s, std::uint64_t sync, std::uint64_t value) {
  std::uint64_t* r = s.meta_word(s.layout.record_offset(sync));
  std::vector<std::uint64_t>& notices = s.record_scratch;
  gather_notices(s, notices);
  const std::uint64_t room = s.layout.record_notices;
  const bool everything = s.heard_everything || (s.lease == 0 && notices.size() > room);
  const std::uint32_t floor = everything ? 0 : truncate_notices(s, notices, room);
  for (std::size_t i = 0; !everything && i < notices.size(); ++i) {
    const std::uint64_t b = notices[i] & 0xffffffffu;
    r[record_header + 2 * i] = (b << 32) | (notices[i] >> 32);
    r[record_header + 2 * i + 1] = static_cast<std::uint64_t>(s.blocks[b].releaser);
  }
  r[0] = s.epoch;
  r[1] = everything ? record_everything : notices.size();
  r[2] = value;
  r[3] = floor;
  ++s.counters.handovers;
  std::atomic_thread_fence(std::memory_order_release);
}

std::uint64_t check_sync(const space_state& s, std::size_t index, bool atomic) {
  const std::uint64_t limit = atomic ? s.layout.syncs - s.mutexes : s.mutexes;
  if (index >= limit) {
    throw std::out_of_range(fmt::format("dsm: {} {} of a space with {} (space_options::{})",
                                        atomic ? "atomic" : "mutex", index, limit,
                                        atomic ? "atomics" : "mutexes"));
  }
  return atomic ? s.mutexes + index : index;
}

/// Takes `sync` and applies its record: the common start of every acquire. On failure the
/// object is freed unchanged.
std::pair<sync_word, handover> acquire_sync(space_state& s, fabric::thread_context& self,
                                            std::uint64_t sync,
                                            deadline_clock::time_point deadline) {
  const sync_word held = lock_sync(s, self, sync, deadline);
  try {
    const handover h = read_record(s, self, sync, held, deadline);
    std::lock_guard lock(s.mutex);
    apply_record(s, self, h, deadline);
    return {held, h};
  } catch (...) {
    unlock_sync(s, self, sync, held, held.last, false);
    throw;
  }
}

[[noreturn]] void throw_value_lost(const space_state& s, std::uint64_t sync, sync_word held) {
  throw error(fmt::format("dsm: {}'s value is lost: rank {}, which stored it last, died",
                          object_name(s, sync), held.last - 1));
}

/// Releases this process's writes and writes its record of `sync` with `value`, under the state
/// mutex; false (nothing written) when the release failed with the exception in `failure`.
bool release_into_record(space_state& s, fabric::thread_context& self, std::uint64_t sync,
                         std::uint64_t value, deadline_clock::time_point deadline,
                         std::exception_ptr& failure) {
  std::lock_guard lock(s.mutex);
  try {
    detail::release_all(s, self, deadline);
  } catch (...) {
    failure = std::current_exception();
    return false;
  }
  write_record(s, sync, value);
  return true;
}

/// Applies peer q's release log of this process's epoch (state mutex not held: taken for the
/// notices). Throws seriema::error when q died: its releases can no longer be learnt.
void acquire_log(space_state& s, fabric::thread_context& self, int q, std::uint64_t epoch,
                 deadline_clock::time_point deadline) {
  std::vector<std::uint64_t>& buffer = record_buffer();
  buffer.resize(std::max<std::uint64_t>(buffer.size(), 1 + s.layout.blocks));
  const std::uint64_t offset = s.layout.log_offset(epoch % 2);
  const auto dead = [&] {
    return error(fmt::format("dsm: acquire on rank {}: rank {} died; its releases cannot be "
                             "learnt",
                             s.rank, q));
  };
  if (!get_words(s, self, q, offset, buffer.data(), 1, deadline)) throw dead();
  if ((buffer[0] >> 32) != (epoch & 0xffffffff)) return;  // nothing released in this epoch yet
  const std::uint64_t count = buffer[0] & 0xffffffff;
  if (count > s.layout.blocks) {
    throw error(fmt::format("dsm: rank {}'s release log counts {} of {} blocks", q, count,
                            s.layout.blocks));
  }
  if (count != 0 && !get_words(s, self, q, offset + 8, buffer.data() + 1, count, deadline)) {
    throw dead();
  }
  std::lock_guard lock(s.mutex);
  for (std::uint64_t i = 1; i <= count; ++i) {
    const std::uint64_t b = buffer[i] >> 32;
    if (b >= s.layout.blocks) {
      throw error(fmt::format("dsm: rank {}'s release log names block {} of {}", q, b,
                              s.layout.blocks));
    }
    detail::apply_notice(s, self, b, static_cast<std::uint32_t>(buffer[i]), q, deadline);
    mark_heard(s, b);
  }
}

}  // namespace

void space::acquire(fabric::thread_context& self, deadline_clock::time_point deadline) {
  space_state& s = *state_;
  detail::entry_guard guard(&s);
  deadline = self.deadline_in_force(deadline);
  std::uint64_t epoch = 0;
  {
    std::lock_guard lock(s.mutex);
    epoch = s.epoch;
    ++s.counters.acquires;
  }
  for (int q = 0; q < static_cast<int>(s.layout.processes); ++q) {
    if (q != s.rank) acquire_log(s, self, q, epoch, deadline);
  }
}

void space::lock(fabric::thread_context& self, std::size_t mutex,
                 deadline_clock::time_point deadline) {
  space_state& s = *state_;
  const std::uint64_t sync = check_sync(s, mutex, false);
  detail::entry_guard guard(&s);
  (void)acquire_sync(s, self, sync, self.deadline_in_force(deadline));
}

void space::unlock(fabric::thread_context& self, std::size_t mutex,
                   deadline_clock::time_point deadline) {
  space_state& s = *state_;
  const std::uint64_t sync = check_sync(s, mutex, false);
  const sync_word held = sync_word::decode(s.held[sync].load(std::memory_order_relaxed));
  if (held.holder != self.id() + 1) {
    throw std::logic_error(fmt::format("dsm: thread {} unlocks mutex {}, which it does not hold",
                                       self.id(), mutex));
  }
  detail::entry_guard guard(&s);
  std::exception_ptr failure;
  if (!release_into_record(s, self, sync, 0, self.deadline_in_force(deadline), failure)) {
    // Some blocks may be released and in no record: the next holder must drop every copy.
    std::lock_guard lock(s.mutex);
    s.heard_everything = true;
    write_record(s, sync, 0);
  }
  unlock_sync(s, self, sync, held, static_cast<std::uint32_t>(s.rank + 1), true);
  if (failure) std::rethrow_exception(failure);
}

std::uint64_t space::load_acquire(fabric::thread_context& self, std::size_t atomic,
                                  deadline_clock::time_point deadline) {
  space_state& s = *state_;
  const std::uint64_t sync = check_sync(s, atomic, true);
  detail::entry_guard guard(&s);
  deadline = self.deadline_in_force(deadline);
  const auto [word, h] = read_record_unlocked(s, self, sync, deadline);
  {
    std::lock_guard lock(s.mutex);
    apply_record(s, self, h, deadline);
  }
  if (h.lost) throw_value_lost(s, sync, word);
  return h.none ? 0 : h.value;
}

void space::store_release(fabric::thread_context& self, std::size_t atomic, std::uint64_t value,
                          deadline_clock::time_point deadline) {
  space_state& s = *state_;
  const std::uint64_t sync = check_sync(s, atomic, true);
  detail::entry_guard guard(&s);
  deadline = self.deadline_in_force(deadline);
  const sync_word held = lock_sync(s, self, sync, deadline);
  std::exception_ptr failure;
  const bool stored = release_into_record(s, self, sync, value, deadline, failure);
  unlock_sync(s, self, sync, held, stored ? static_cast<std::uint32_t>(s.rank + 1) : held.last,
              stored);
  if (failure) std::rethrow_exception(failure);
}

bool space::compare_exchange_acquire(fabric::thread_context& self, std::size_t atomic,
                                     std::uint64_t& expected, std::uint64_t desired,
                                     deadline_clock::time_point deadline) {
  space_state& s = *state_;
  const std::uint64_t sync = check_sync(s, atomic, true);
  detail::entry_guard guard(&s);
  deadline = self.deadline_in_force(deadline);
  const auto [held, h] = acquire_sync(s, self, sync, deadline);
  const std::uint64_t value = h.none ? 0 : h.value;
  if (h.lost || value != expected) {
    unlock_sync(s, self, sync, held, held.last, false);
    if (h.lost) throw_value_lost(s, sync, held);
    expected = value;
    return false;
  }
  std::exception_ptr failure;
  const bool stored = release_into_record(s, self, sync, desired, deadline, failure);
  unlock_sync(s, self, sync, held, stored ? static_cast<std::uint32_t>(s.rank + 1) : held.last,
              stored);
  if (failure) std::rethrow_exception(failure);
  return true;
}

}  // namespace seriema::dsm
