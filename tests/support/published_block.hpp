// A block of this rank's arena, zeroed and published to every rank (allgather of its locator):
// what the multi-process transfer tests put into, read from and map.
#pragma once

#include <cstring>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <stdexcept>
#include <vector>

#include "support/mp_main.hpp"

namespace seriema::test {

struct published_block {
  transfer::memory_block block;
  std::vector<transfer::remote_memory_locator> all;  // indexed by rank
};

// Collective: every rank calls it. Throws std::runtime_error when the arena is exhausted.
inline published_block publish_block() {
  published_block out;
  out.block = rt().local_arena().allocate_block();
  if (out.block.data == nullptr) throw std::runtime_error("arena exhausted");
  std::memset(out.block.data, 0, out.block.size);
  auto mine = transfer::remote_memory_locator::make(rt().rank(), *out.block.segment,
                                                    out.block.data, out.block.size);
  out.all = allgather_value(mine);
  return out;
}

}  // namespace seriema::test
