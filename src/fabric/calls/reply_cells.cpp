// Reply cells: the CAS protocol a reply's writer follows, and the owner's free-cell bitmap
// (see reply_cells.hpp for who writes which word when).
#include <bit>
#include <cstring>
#include <seriema/fabric/detail/reply_cells.hpp>

namespace seriema::fabric {

namespace {
// Cells are shared with other processes: their words must be lock-free atomics.
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free);
std::atomic_ref<std::uint64_t> word_of(std::byte* cell) noexcept {
  return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(cell));
}
}  // namespace

namespace reply_cell {

bool write(std::byte* cell, std::uint32_t generation, std::span<const std::byte> value,
           outcome result) noexcept {
  const bool ok = result == outcome::done;
  if (!ok && !is_reply_failure(result)) return false;
  auto w = word_of(cell);
  std::uint64_t expected;
  if (ok) {
    if (value.size() > value_capacity) return false;
    // Straight to the CAS: a load first would fetch the line shared and then upgrade it, two
    // trips to the caller's core instead of one.
    expected = word(generation, value.size(), pending);
  } else {
    expected = w.load(std::memory_order_relaxed);  // a failure carries no size: take the cell's
    if ((expected >> 32) != generation || (expected & state_mask) != pending) return false;
  }
  const std::uint64_t claimed_word = (expected & ~(state_mask | why_mask)) | claimed;
  if (!w.compare_exchange_strong(expected, claimed_word, std::memory_order_acquire,
                                 std::memory_order_relaxed)) {
    return false;
  }
  if (ok && !value.empty()) std::memcpy(cell + value_offset, value.data(), value.size());
  const std::uint64_t base = claimed_word & ~(state_mask | why_mask);
  w.store(ok ? (base | ready) : (base | word(0, 0, failed, result)), std::memory_order_release);
  return true;
}

bool fail_if_pending(std::byte* cell, outcome why) noexcept {
  auto w = word_of(cell);
  std::uint64_t now = w.load(std::memory_order_acquire);
  while ((now & state_mask) == pending) {
    const std::uint64_t failed_word = (now & ~(state_mask | why_mask)) | word(0, 0, failed, why);
    if (w.compare_exchange_weak(now, failed_word, std::memory_order_acq_rel,
                                std::memory_order_acquire)) {
      return true;
    }
  }
  return false;
}

std::byte* in_region(std::span<std::byte> region, std::uint32_t index) noexcept {
  const std::uint64_t offset = std::uint64_t{index & ~index_bit} * size;
  if (offset > region.size() || region.size() - offset < size) return nullptr;
  return region.data() + offset;
}

}  // namespace reply_cell

void reply_cell_table::attach(std::byte* cells, std::uint32_t first_index, std::uint32_t count) {
  cells_ = cells;
  first_ = first_index;
  count_ = count;
  bit_words_ = (count + 63) / 64;
  free_bits_ = std::make_unique<std::atomic<std::uint64_t>[]>(bit_words_);
  destinations_ = std::make_unique<std::atomic<std::int32_t>[]>(count);
  // A free cell is never pending (a zeroed word would read "pending, generation 0, size 0"
  // and accept a forged reply of generation 0): claimed, generation 0; open() makes it 1.
  for (std::uint32_t i = 0; i < count; ++i) {
    word_of(cells + std::size_t{i} * reply_cell::size)
        .store(reply_cell::word(0, 0, reply_cell::claimed), std::memory_order_relaxed);
  }
  for (std::size_t w = 0; w < bit_words_; ++w) {
    const std::size_t left = count - w * 64;
    free_bits_[w].store(left >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << left) - 1,
                        std::memory_order_relaxed);
  }
}

std::byte* reply_cell_table::cell(std::uint32_t slot) const noexcept {
  const std::uint32_t index = slot & ~reply_cell::index_bit;
  if ((slot & reply_cell::index_bit) == 0 || index < first_ || index - first_ >= count_) {
    return nullptr;
  }
  return cells_ + std::size_t{index - first_} * reply_cell::size;
}

std::optional<std::pair<std::uint32_t, std::uint32_t>> reply_cell_table::open(
    std::size_t value_size, int destination) noexcept {
  if (value_size > reply_cell::value_capacity) return std::nullopt;
  if (draining_count_.load(std::memory_order_relaxed) != 0) reclaim_drained();
  for (std::size_t w = 0; w < bit_words_; ++w) {
    std::uint64_t bits = free_bits_[w].load(std::memory_order_relaxed);
    while (bits != 0) {
      const std::uint64_t taken = bits & (~bits + 1);  // lowest free cell of this word
      if (!free_bits_[w].compare_exchange_weak(bits, bits & ~taken, std::memory_order_acquire,
                                               std::memory_order_relaxed)) {
        continue;  // bits reloaded
      }
      const auto index = first_ + static_cast<std::uint32_t>(w * 64 + std::countr_zero(taken));
      const std::uint32_t slot = reply_cell::index_bit | index;
      destinations_[index - first_].store(destination, std::memory_order_relaxed);
      auto w8 = word_of(cell(slot));
      // A free cell is ours alone: its last generation, plus one.
      const auto generation =
          static_cast<std::uint32_t>(w8.load(std::memory_order_relaxed) >> 32) + 1;
      w8.store(reply_cell::word(generation, value_size, reply_cell::pending),
               std::memory_order_release);
      return std::pair{slot, generation};
    }
  }
  return std::nullopt;
}

void reply_cell_table::release(std::uint32_t slot) noexcept {
  const std::uint32_t bit = (slot & ~reply_cell::index_bit) - first_;
  free_bits_[bit / 64].fetch_or(std::uint64_t{1} << (bit % 64), std::memory_order_release);
}

outcome reply_cell_table::collect(std::uint32_t slot, std::uint32_t generation, void* out,
                                  std::size_t value_size) noexcept {
  std::byte* c = cell(slot);
  const std::uint64_t now = word_of(c).load(std::memory_order_acquire);
  if (now == reply_cell::word(generation, value_size, reply_cell::ready)) {
    std::memcpy(out, c + reply_cell::value_offset, value_size);
    release(slot);
    return outcome::done;
  }
  const std::uint64_t failed_base = reply_cell::word(generation, value_size, reply_cell::failed);
  if ((now & ~reply_cell::why_mask) == failed_base) {
    release(slot);
    const auto why = static_cast<outcome>((now & reply_cell::why_mask) >> 2);
    // A failed word always carries its outcome; a peer that wrote none still failed the call.
    return why == outcome::pending || why == outcome::done ? outcome::may_have_executed : why;
  }
  return outcome::pending;
}

void reply_cell_table::abandon(std::uint32_t slot, std::uint32_t generation,
                               std::size_t value_size) noexcept {
  auto w = word_of(cell(slot));
  std::uint64_t expected = reply_cell::word(generation, value_size, reply_cell::pending);
  if (w.compare_exchange_strong(expected, reply_cell::word(generation, value_size,
                                                           reply_cell::claimed),
                                std::memory_order_acquire, std::memory_order_relaxed) ||
      (expected & reply_cell::state_mask) != reply_cell::claimed) {
    release(slot);  // closed by us, or the reply is already complete: nobody writes it again
    return;
  }
  std::lock_guard lock(draining_mutex_);  // a writer is between its CAS and its last store
  draining_.emplace_back(slot, generation);
  draining_count_.store(draining_.size(), std::memory_order_relaxed);
}

void reply_cell_table::reclaim_drained() noexcept {
  std::lock_guard lock(draining_mutex_);
  std::erase_if(draining_, [&](const std::pair<std::uint32_t, std::uint32_t>& d) {
    const std::uint64_t now = word_of(cell(d.first)).load(std::memory_order_acquire);
    if ((now & reply_cell::state_mask) == reply_cell::claimed) return false;
    release(d.first);
    return true;
  });
  draining_count_.store(draining_.size(), std::memory_order_relaxed);
}

void reply_cell_table::fail_unsent(std::uint32_t slot) noexcept {
  // A CAS, not a store: a send reported as failed may still have reached its callee, whose
  // writer may hold the cell already; then its outcome stands and collect() reads it.
  (void)reply_cell::fail_if_pending(cell(slot), outcome::not_executed);
}

std::size_t reply_cell_table::fail_pending_to(int destination, outcome why) noexcept {
  std::size_t failed = 0;
  for (std::uint32_t i = 0; i < count_; ++i) {
    std::byte* c = cells_ + std::size_t{i} * reply_cell::size;
    // The destination read after the pending word it was stored before (acquire) is that
    // call's; the CAS from exactly that word fails nothing else: a cell closed and opened
    // again meanwhile carries another generation.
    std::uint64_t now = word_of(c).load(std::memory_order_acquire);
    if ((now & reply_cell::state_mask) != reply_cell::pending) continue;
    if (destinations_[i].load(std::memory_order_relaxed) != destination) continue;
    const std::uint64_t failed_word =
        (now & ~(reply_cell::state_mask | reply_cell::why_mask)) |
        reply_cell::word(0, 0, reply_cell::failed, why);
    if (word_of(c).compare_exchange_strong(now, failed_word, std::memory_order_acq_rel,
                                           std::memory_order_relaxed)) {
      ++failed;
    }
  }
  return failed;
}

bool reply_cell_table::deliver(std::uint32_t slot, std::uint32_t generation,
                               std::span<const std::byte> value, outcome result) noexcept {
  std::byte* c = cell(slot);
  return c != nullptr && reply_cell::write(c, generation, value, result);
}

}  // namespace seriema::fabric
