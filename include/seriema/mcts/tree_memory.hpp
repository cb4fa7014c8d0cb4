// Per-thread memory for MCTS tree nodes: a bump allocator over blocks, released all at once
// between moves, with counters that show the tree was freed and a per-process budget that
// refuses new blocks once reached.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace seriema::mcts {

/// Bytes and blocks handed out and given back, per process (all pools of the process add here).
struct tree_memory_counters {
  std::atomic<std::uint64_t> blocks_allocated{0};  ///< blocks taken from the heap
  std::atomic<std::uint64_t> blocks_released{0};   ///< blocks given back
  std::atomic<std::uint64_t> bytes_allocated{0};  ///< of blocks
  std::atomic<std::uint64_t> bytes_released{0};   ///< of blocks given back
  /// Most bytes the pools may hold together (0: no limit). Written only between searches
  /// (no pool allocates then); read when a pool takes a block.
  std::uint64_t budget_bytes = 0;
  /// Set by the first try_allocate() refused since reset_budget(): the budget was reached.
  std::atomic<bool> budget_reached{false};
  /// Bytes held now.
  [[nodiscard]] std::uint64_t bytes_live() const noexcept {
    return bytes_allocated.load(std::memory_order_relaxed) -
           bytes_released.load(std::memory_order_relaxed);
  }
  /// Between searches: the budget of the next one (0: no limit), not reached yet.
  void reset_budget(std::uint64_t bytes) noexcept {
    budget_bytes = bytes;
    budget_reached.store(false, std::memory_order_relaxed);
  }
  /// Counts a block of `size` bytes as taken. `within_budget`: only if the bytes held would
  /// stay within budget_bytes (a CAS on bytes_allocated, so that pools of several threads
  /// taking blocks at once cannot pass it together); false, and budget_reached set, if not.
  bool take_block(std::size_t size, bool within_budget) noexcept {
    if (!within_budget || budget_bytes == 0) {
      blocks_allocated.fetch_add(1, std::memory_order_relaxed);
      bytes_allocated.fetch_add(size, std::memory_order_relaxed);
      return true;
    }
    // A refusal only loads: past the budget every frontier step of the search comes here.
    std::uint64_t allocated = bytes_allocated.load(std::memory_order_relaxed);
    for (;;) {
      const std::uint64_t live = allocated - bytes_released.load(std::memory_order_relaxed);
      if (live + size > budget_bytes) {
        if (!budget_reached.load(std::memory_order_relaxed)) {
          budget_reached.store(true, std::memory_order_relaxed);
        }
        return false;
      }
      if (bytes_allocated.compare_exchange_weak(allocated, allocated + size,
                                                std::memory_order_relaxed)) {
        blocks_allocated.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
    }
  }
};

/// A bump allocator for search-tree nodes, in 256 KiB blocks, released all at once.
/// The budget (tree_memory_counters::budget_bytes, per process) is checked only when a block is
/// taken, never per object: allocate() always succeeds (the root, which every search needs),
/// try_allocate() returns null where a new block would pass the budget. So the pools of a
/// process hold at most the budget, plus the blocks allocate() took beyond it.
/// Thread-safety: one thread allocates at a time (the pool's owner during a search; the main
/// thread between searches). Memory is never freed piecewise: release() gives every block back,
/// so objects placed here must be trivially destructible or destroyed by their user first.
class tree_pool {
 public:
  static constexpr std::size_t block_bytes = std::size_t{256} << 10;  ///< usual block size

  /// An empty pool counting into `counters` (which must outlive it).
  explicit tree_pool(tree_memory_counters& counters) noexcept : counters_(&counters) {}
  tree_pool(const tree_pool&) = delete;
  tree_pool& operator=(const tree_pool&) = delete;
  tree_pool(tree_pool&&) noexcept = default;  ///< takes the other pool's blocks
  /// Gives this pool's blocks back and takes the other's (which is left empty, counting into
  /// the same counters as before).
  tree_pool& operator=(tree_pool&& other) noexcept {
    if (this == &other) return *this;
    release();
    counters_ = other.counters_;
    blocks_ = std::move(other.blocks_);
    used_ = other.used_;
    capacity_ = other.capacity_;
    other.blocks_.clear();
    other.used_ = other.capacity_ = 0;
    return *this;
  }
  ~tree_pool() { release(); }

  /// `bytes` aligned to `alignment` (a power of two up to 64). Throws std::bad_alloc.
  void* allocate(std::size_t bytes, std::size_t alignment) {
    return place(bytes, alignment, false);
  }
  /// As allocate(), but null (and the counters' budget_reached set) where the current block has
  /// no room and a new one would pass the budget. Throws std::bad_alloc.
  void* try_allocate(std::size_t bytes, std::size_t alignment) {
    return place(bytes, alignment, true);
  }
  /// A T constructed from `args` in the pool (never destroyed by the pool).
  template <class T, class... Args>
  T* create(Args&&... args) {
    return new (allocate(sizeof(T), alignof(T))) T(static_cast<Args&&>(args)...);
  }
  /// As create(), but null where try_allocate() refuses.
  template <class T, class... Args>
  T* try_create(Args&&... args) {
    void* where = try_allocate(sizeof(T), alignof(T));
    return where == nullptr ? nullptr : new (where) T(static_cast<Args&&>(args)...);
  }

  /// Gives every block back (the tree of the last search is gone).
  void release() noexcept {
    for (auto& b : blocks_) {
      counters_->blocks_released.fetch_add(1, std::memory_order_relaxed);
      counters_->bytes_released.fetch_add(b.size, std::memory_order_relaxed);
    }
    blocks_.clear();
    used_ = capacity_ = 0;
  }

 private:
  void* place(std::size_t bytes, std::size_t alignment, bool within_budget) {
    std::size_t offset = (used_ + alignment - 1) & ~(alignment - 1);
    if (blocks_.empty() || offset + bytes > capacity_) {
      const std::size_t size = bytes + 64 > block_bytes ? bytes + 64 : block_bytes;
      if (!counters_->take_block(size, within_budget)) return nullptr;
      try {
        blocks_.push_back(block{block_bytes_ptr(static_cast<std::byte*>(
                                    ::operator new[](size, std::align_val_t{64}))),
                                size});
      } catch (...) {  // not taken after all
        counters_->blocks_released.fetch_add(1, std::memory_order_relaxed);
        counters_->bytes_released.fetch_add(size, std::memory_order_relaxed);
        throw;
      }
      capacity_ = size;
      offset = 0;
    }
    used_ = offset + bytes;
    return blocks_.back().data.get() + offset;
  }
  struct aligned_delete {
    void operator()(std::byte* p) const noexcept { ::operator delete[](p, std::align_val_t{64}); }
  };
  using block_bytes_ptr = std::unique_ptr<std::byte[], aligned_delete>;
  struct block {
    block_bytes_ptr data;
    std::size_t size;
  };
  tree_memory_counters* counters_;
  std::vector<block> blocks_;
  std::size_t used_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace seriema::mcts
