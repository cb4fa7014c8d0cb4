// The process's services to its peers: registered memory allocated, freed and written on their
// behalf (the allocation service behind messengers and allocate_remote), and the reply cells
// peers on this machine write call_return values into.
#include <fmt/format.h>

#include <cstring>
#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include "runtime/runtime_internal.hpp"

namespace seriema::fabric {

transfer::registered_buffer runtime::service_allocate(int zone, std::size_t bytes) {
  transfer::arena& zone_arena = arena_for_zone(zone);
  std::lock_guard lock(service_allocators_mutex_);
  if (service_allocators_.size() <= static_cast<std::size_t>(zone)) {
    service_allocators_.resize(static_cast<std::size_t>(zone) + 1);
  }
  auto& slot = service_allocators_[static_cast<std::size_t>(zone)];
  if (!slot) {
    transfer::general_allocator_config config;
    config.policy = transfer::fit_policy::best_fit;
    // No cap of its own: the zone's arena (SERIEMA_ARENA_LIMIT) bounds it. The allocator's
    // default of 1 GiB was reached by the messengers' rings alone at 16 threads (16 x 16 pairs x
    // 2 chunks of 2 MiB), and the last channel then never got its ring.
    config.max_bytes = std::numeric_limits<std::size_t>::max();
    slot = std::make_unique<transfer::general_allocator>(zone_arena, config);
  }
  transfer::registered_buffer buffer = slot->allocate(bytes);
  if (buffer) {
    try {
      std::lock_guard writable_lock(writable_mutex_);
      writable_[reinterpret_cast<std::uint64_t>(buffer.data)] = buffer.size;
    } catch (...) {
      (void)slot->free(buffer);  // not handed out: the caller sees the exception
      throw;
    }
  }
  return buffer;
}

bool runtime::service_free(std::uint64_t address, std::uint64_t size) {
  service_withdraw(address, size);
  std::lock_guard lock(service_allocators_mutex_);
  for (auto& allocator : service_allocators_) {
    if (!allocator) continue;
    transfer::registered_buffer buffer{reinterpret_cast<std::byte*>(address),
                                       static_cast<std::size_t>(size), nullptr, nullptr};
    if (allocator->free(buffer) == transfer::free_status::ok) return true;
  }
  return false;
}

void runtime::service_expose(std::uint64_t address, std::uint64_t size) {
  std::lock_guard writable_lock(writable_mutex_);
  writable_[address] = size;
}

void runtime::service_withdraw(std::uint64_t address, std::uint64_t size) {
  // No write message lands in it from here on (the handler checks under this lock).
  std::lock_guard writable_lock(writable_mutex_);
  auto it = writable_.find(address);
  if (it != writable_.end() && it->second == size) writable_.erase(it);
}

void runtime::service_lend(std::uint64_t address, std::uint64_t size) {
  std::lock_guard lock(lent_mutex_);
  lent_[address] = size;
}

bool runtime::service_return(std::uint64_t address, std::uint64_t size) {
  {
    std::lock_guard lock(lent_mutex_);
    auto it = lent_.find(address);
    if (it == lent_.end() || it->second != size) return false;
    lent_.erase(it);
  }
  return service_free(address, size);
}

bool runtime::service_write(const write_message& m, std::span<const std::byte> data) {
  // Overflow-safe range checks: every operand is at most m.size once the first test passed.
  const bool in_range = m.data_offset <= m.size && data.size() <= m.size - m.data_offset &&
                        m.word_offset <= m.size && sizeof m.word <= m.size - m.word_offset &&
                        (m.base + m.word_offset) % alignof(std::uint64_t) == 0;
  if (!in_range) return false;
  std::lock_guard lock(writable_mutex_);
  auto it = writable_.find(m.base);
  if (it == writable_.end() || it->second != m.size) return false;
  auto* base = reinterpret_cast<std::byte*>(m.base);
  if (!data.empty()) std::memcpy(base + m.data_offset, data.data(), data.size());
  // The payload is in place before the word that publishes it (release; readers acquire).
  std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(base + m.word_offset))
      .store(m.word, std::memory_order_release);
  return true;
}

void runtime::attach_reply_cells() {
  const std::uint32_t per_thread = options_.reply_cells;
  if (per_thread == 0) return;
  const std::size_t threads = local_states_.size() + 1;  // + the service role's state
  reply_region_ = std::make_unique<transfer::shared_region>(
      *context_, threads * per_thread * reply_cell::size,
      "the reply cells (SERIEMA_REPLY_CELLS per thread; 0 does without them)");
  std::byte* base = reply_region_->bytes().data();
  std::uint32_t first = 0;
  auto attach = [&](local_thread_state& state) {
    state.cells.attach(base + std::size_t{first} * reply_cell::size, first, per_thread);
    first += per_thread;
  };
  for (auto& state : local_states_) attach(*state);
  attach(*service_state_);
}

std::span<std::byte> runtime::reply_cells_of(int rank) {
  if (rank == this->rank()) return reply_region_ ? reply_region_->bytes() : std::span<std::byte>{};
  reply_peer& peer = reply_peers_[static_cast<std::size_t>(rank)];
  int state = peer.state.load(std::memory_order_acquire);
  if (state == 0) {
    std::lock_guard lock(reply_peers_mutex_);
    state = peer.state.load(std::memory_order_relaxed);
    if (state == 0) {
      const auto& locator = reply_locators_[static_cast<std::size_t>(rank)];
      state = 2;
      if (locator.valid() && same_machine(rank)) {
        try {
          peer.mapping.emplace(endpoint(rank), locator, true);
          if (peer.mapping->direct() != nullptr) {
            peer.cells = {peer.mapping->direct(), static_cast<std::size_t>(locator.size)};
            state = 1;
          } else {
            peer.mapping.reset();  // no rkey kept for nothing
          }
        } catch (const std::exception& e) {
          // The replies still arrive, as messages; say once why they do not take the direct way.
          log::info("replies to rank {} travel as messages: its reply cells do not map here ({})",
                    rank, e.what());
        }
      }
      peer.state.store(state, std::memory_order_release);
    }
  }
  return state == 1 ? peer.cells : std::span<std::byte>{};
}

}  // namespace seriema::fabric
