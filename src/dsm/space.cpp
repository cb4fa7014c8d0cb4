// A space's creation (options agreed, one address mapped everywhere, regions registered and
// exchanged), its allocation cursor, and what it tells about itself.
#include <fmt/format.h>
#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <new>
#include <seriema/base/error.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/detail/publish_choice.hpp>
#include <stdexcept>
#include <string>

#include "faults.hpp"
#include "space_state.hpp"

namespace seriema::dsm {

namespace {

std::atomic<std::uint64_t> next_space_id{1};

constexpr std::size_t max_space_bytes = std::size_t{64} << 30;
/// Allocations are rounded to this, so the cursor stays aligned for any ordinary type.
constexpr std::size_t allocation_grain = 64;

void check(const space_options& o) {
  const std::size_t b = o.block_bytes;
  if (b < 4096 || b > (std::size_t{1} << 20) || (b & (b - 1)) != 0) {
    throw config_error(fmt::format("space_options: block_bytes {} must be a power of two from "
                                   "4096 to 1048576 (the seed's is 32768)",
                                   b));
  }
  if (o.bytes == 0 || o.bytes % b != 0 || o.bytes > max_space_bytes) {
    throw config_error(fmt::format("space_options: bytes {} must be a positive multiple of "
                                   "block_bytes ({}) of at most 64 GiB",
                                   o.bytes, b));
  }
  if (o.bytes / b > 0xffffffffull) {
    throw config_error(fmt::format("space_options: {} blocks are more than 2^32", o.bytes / b));
  }
  constexpr std::size_t most_syncs = std::size_t{1} << 20;
  if (o.mutexes > most_syncs || o.atomics > most_syncs - o.mutexes) {
    throw config_error(fmt::format("space_options: mutexes ({}) + atomics ({}) must be at most "
                                   "{}",
                                   o.mutexes, o.atomics, most_syncs));
  }
  if (o.handover_notices == 0 || o.handover_notices > most_syncs) {
    throw config_error(fmt::format("space_options: handover_notices {} must be 1 .. {}",
                                   o.handover_notices, most_syncs));
  }
  if (o.lease > most_syncs) {
    throw config_error(fmt::format("space_options: lease {} must be 0 .. {}", o.lease,
                                   most_syncs));
  }
}

bool same_shape(const space_options& a, const space_options& b) {
  return a.bytes == b.bytes && a.block_bytes == b.block_bytes && a.mutexes == b.mutexes &&
         a.atomics == b.atomics && a.handover_notices == b.handover_notices &&
         a.fault_driven == b.fault_driven && a.protocol == b.protocol && a.lease == b.lease;
}

std::string describe(const space_options& o) {
  return fmt::format("{} bytes in blocks of {}, {} mutexes, {} atomics, {} notices per hand-over, "
                     "{} access, {}, lease {}",
                     o.bytes, o.block_bytes, o.mutexes, o.atomics, o.handover_notices,
                     o.fault_driven ? "fault-driven" : "explicit",
                     o.protocol == coherence_protocol::fixed_home ? "fixed home" : "floating home",
                     o.lease);
}

template <class T>
std::vector<std::byte> bytes_of(const T& value) {
  std::vector<std::byte> out(sizeof(T));
  std::memcpy(out.data(), &value, sizeof(T));
  return out;
}

template <class T>
T value_of(const std::vector<std::byte>& bytes, int rank) {
  if (bytes.size() != sizeof(T)) {
    throw error(fmt::format("dsm: rank {} sent {} bytes where {} were expected (a different "
                            "seriema build?)",
                            rank, bytes.size(), sizeof(T)));
  }
  T value;
  std::memcpy(&value, bytes.data(), sizeof(T));
  return value;
}

/// Every rank must create the space with rank 0's options.
void agree_on(fabric::runtime& rt, const space_options& mine, deadline_clock::time_point deadline) {
  const auto all = rt.allgather(bytes_of(mine), deadline);
  for (int r = 0; r < rt.size(); ++r) {
    const auto theirs = value_of<space_options>(all[static_cast<std::size_t>(r)], r);
    if (!same_shape(theirs, mine)) {
      throw config_error(fmt::format("dsm: rank {} creates a space of {}, rank {} one of {}: "
                                     "every process must pass equal space_options",
                                     rt.rank(), describe(mine), r, describe(theirs)));
    }
  }
}

/// Where rank 0 proposes the space on attempt `attempt` (0: where its kernel chooses).
std::byte* propose(std::size_t bytes, int attempt) {
  void* hint = attempt == 0 ? nullptr
                            : reinterpret_cast<void*>(std::uintptr_t{0x200000000000} +
                                                      std::uintptr_t(attempt) * 0x40000000000);
  const int fixed = attempt == 0 ? 0 : MAP_FIXED_NOREPLACE;
  void* p = mmap(hint, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | fixed, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
}

/// Maps the private copy at one address in every process: rank 0 proposes, the others map it
/// there or report that they cannot, and a refused proposal is retried elsewhere.
std::byte* map_everywhere(fabric::runtime& rt, std::size_t bytes,
                          deadline_clock::time_point deadline) {
  constexpr int attempts = 8;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    std::byte* mine = rt.rank() == 0 ? propose(bytes, attempt) : nullptr;
    const auto proposals = rt.allgather(bytes_of(mine), deadline);
    auto* proposed = value_of<std::byte*>(proposals[0], 0);
    if (rt.rank() != 0 && proposed != nullptr) {
      void* p = mmap(proposed, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
      if (p != MAP_FAILED && p != proposed) munmap(p, bytes);  // an old kernel's mere hint
      mine = p == proposed ? proposed : nullptr;
    }
    const std::uint64_t missing = rt.allreduce_sum(mine == nullptr ? 1 : 0, deadline);
    if (missing == 0) return mine;
    if (mine != nullptr) munmap(mine, bytes);
  }
  throw error(fmt::format("dsm: no address range of {} bytes was free in every process after {} "
                          "attempts (rank {}); a smaller space may fit",
                          bytes, attempts, rt.rank()));
}

fabric::detail::publish_route route_for(fabric::runtime& rt) {
  return {true, invoke::detail::publishes_by_put_from_environment(rt.context().network_rdma())};
}

struct hello {
  transfer::remote_memory_locator public_copy;
  transfer::remote_memory_locator meta;
};

/// Every process's public copy and meta region, as the others' handles will reach them.
void exchange_locators(fabric::runtime& rt, detail::space_state& s,
                       deadline_clock::time_point deadline) {
  const hello mine{s.public_region->locator(s.rank), s.meta_region->locator(s.rank)};
  const auto all = rt.allgather(bytes_of(mine), deadline);
  for (int r = 0; r < rt.size(); ++r) {
    const auto h = value_of<hello>(all[static_cast<std::size_t>(r)], r);
    s.public_of.push_back(h.public_copy);
    s.meta_of.push_back(h.meta);
  }
}

/// Every process holds every block at first (all zeros): each directory word this process
/// manages names them all. Before the collectives that let a peer reach the words.
void start_directory(detail::space_state& s) {
  const std::uint64_t everyone =
      s.layout.processes == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << s.layout.processes) - 1;
  for (std::uint64_t b = static_cast<std::uint64_t>(s.rank); b < s.layout.blocks;
       b += s.layout.processes) {
    *s.meta_word(s.layout.directory_offset(b)) = everyone;
  }
}

/// Lets peers' write messages land in (or withdraws) the meta region (notices) and, with a fixed
/// home, the public copy (merged blocks put back into their home).
void expose(fabric::runtime& rt, detail::space_state& s, bool open) {
  const auto each = [&](transfer::shared_region& r) {
    const auto at = reinterpret_cast<std::uint64_t>(r.bytes().data());
    if (open) {
      rt.service_expose(at, r.bytes().size());
    } else {
      rt.service_withdraw(at, r.bytes().size());
    }
  };
  each(*s.meta_region);
  if (s.fixed_home) each(*s.public_region);
}

int count_local_workers(const fabric::runtime& rt) {
  int n = 0;
  for (fabric::thread_id t = 0; t < rt.placement().thread_count(); ++t) {
    if (rt.placement().locate(t).process == rt.rank()) ++n;
  }
  return n;
}

}  // namespace

space::space(fabric::runtime& rt, const space_options& options,
             deadline_clock::time_point deadline)
    : state_(std::make_unique<detail::space_state>(rt, next_space_id.fetch_add(1))) {
  check(options);
  if (options.protocol == coherence_protocol::fixed_home && rt.size() > 64) {
    throw config_error(fmt::format("space_options: the fixed-home protocol's directory holds 64 "
                                   "processes; the job has {}",
                                   rt.size()));
  }
  if (rt.size() > static_cast<int>(detail::block_word::max_process) ||
      rt.size() > static_cast<int>(detail::sync_word::max_last) ||
      rt.placement().thread_count() > detail::sync_word::max_holder) {
    throw config_error(fmt::format("dsm: a space's lock words name at most {} processes and {} "
                                   "threads; the job has {} and {}",
                                   detail::block_word::max_process, detail::sync_word::max_holder,
                                   rt.size(), rt.placement().thread_count()));
  }
  if (deadline == no_deadline) deadline = rt.default_deadline();
  agree_on(rt, options, deadline);
  detail::space_state& s = *state_;
  s.rank = rt.rank();
  s.layout = {options.bytes,
              options.block_bytes,
              options.bytes / options.block_bytes,
              static_cast<std::uint64_t>(rt.size()),
              options.mutexes + options.atomics,
              options.handover_notices};
  s.mutexes = options.mutexes;
  s.fault_driven = options.fault_driven;
  s.fixed_home = options.protocol == coherence_protocol::fixed_home;
  s.lease = s.fixed_home ? 0 : options.lease;
  s.held = std::make_unique<std::atomic<std::uint64_t>[]>(s.layout.syncs);
  s.last_seen = std::make_unique<std::atomic<std::uint64_t>[]>(s.layout.syncs);
  s.route = route_for(rt);
  s.local_workers = count_local_workers(rt);
  s.blocks.assign(s.layout.blocks, detail::block_state{});
  s.public_region = std::make_unique<transfer::shared_region>(
      rt.context(), s.layout.public_bytes(), "a shared space's public copy (space_options::bytes)");
  s.meta_region = std::make_unique<transfer::shared_region>(
      rt.context(), s.layout.meta_bytes(),
      "a shared space's block words and notice board (space_options::bytes / block_bytes)");
  if (s.fixed_home) start_directory(s);
  // Notices published by write message land in the board like a put. Exposed before the
  // collectives below: a peer that returns from them first may publish into it at once.
  expose(rt, s, true);
  try {
    exchange_locators(rt, s, deadline);
    s.base = map_everywhere(rt, options.bytes, deadline);
    s.protocol_view = s.base;
    if (s.fault_driven) detail::register_fault_space(s);
  } catch (...) {
    if (s.base != nullptr) munmap(s.base, s.layout.bytes);
    if (s.protocol_view != s.base) munmap(s.protocol_view, s.layout.bytes);
    expose(rt, s, false);
    throw;
  }
}

space::~space() {
  detail::space_state& s = *state_;
  if (s.fault_driven) detail::unregister_fault_space(s);
  if (s.base != nullptr) munmap(s.base, s.layout.bytes);
  if (s.protocol_view != s.base) munmap(s.protocol_view, s.layout.bytes);
  expose(s.rt, s, false);
}

void* space::allocate_bytes(fabric::thread_context& self, std::size_t bytes, std::size_t align,
                            deadline_clock::time_point deadline) {
  detail::space_state& s = *state_;
  if (align > allocation_grain) {
    throw std::invalid_argument(fmt::format("dsm: alignment {} is more than a space gives ({})",
                                            align, allocation_grain));
  }
  if (bytes > s.layout.bytes) throw std::bad_alloc();
  const std::uint64_t rounded =
      (bytes + allocation_grain - 1) / allocation_grain * allocation_grain;
  const fabric::atomic_result r = s.peer(self, 0).words->execute(
      fabric::detail::atomic_op::fetch_add, 0, rounded, 0, deadline);
  if (r.how == fabric::outcome::deadline_exceeded) {
    throw deadline_error("dsm: the allocation cursor at rank 0 did not answer by the deadline "
                         "(the allocation may have happened and is then lost)");
  }
  if (!r.ok()) {
    throw error(fmt::format("dsm: the allocation cursor at rank 0 did not answer: {}",
                            fabric::to_string(r.how)));
  }
  if (r.value > s.layout.bytes - rounded) throw std::bad_alloc();
  return s.base + r.value;
}

bool space::contains(const void* p, std::size_t n) const noexcept {
  const detail::space_state& s = *state_;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const auto first = reinterpret_cast<std::uintptr_t>(s.base);
  return at >= first && n <= s.layout.bytes && at - first <= s.layout.bytes - n;
}

std::pair<std::size_t, std::size_t> space::slice(const fabric::thread_context& self,
                                                  std::size_t first, std::size_t last) const {
  if (last <= first) return {first, first};
  const std::size_t n = last - first;
  const std::size_t workers = self.thread_count();
  const std::size_t w = self.id();
  if (w >= workers) {
    throw error(fmt::format("dsm: parallel_for on thread {}, which is not a worker", w));
  }
  // n x w may overflow a 64-bit product for huge ranges: split into quotient and remainder.
  const auto bound = [&](std::size_t k) {
    return first + (n / workers) * k + (n % workers) * k / workers;
  };
  return {bound(w), bound(w + 1)};
}

std::byte* space::base() const noexcept { return state_->base; }
std::size_t space::size() const noexcept { return state_->layout.bytes; }
std::size_t space::block_bytes() const noexcept { return state_->layout.block_bytes; }

space_counters space::counters() const {
  std::lock_guard lock(state_->mutex);
  return state_->counters;
}

}  // namespace seriema::dsm
