// The per-thread stack of scratch buffers behind scratch_lease.
#include <memory>
#include <seriema/fabric/detail/scratch.hpp>
#include <vector>

namespace seriema::fabric::detail {

namespace {
struct scratch_stack {
  std::vector<std::unique_ptr<std::vector<std::byte>>> buffers;
  std::size_t depth = 0;
};
thread_local scratch_stack scratch;
}  // namespace

scratch_lease::scratch_lease() {
  if (scratch.depth == scratch.buffers.size()) {
    scratch.buffers.push_back(std::make_unique<std::vector<std::byte>>());
  }
  bytes_ = scratch.buffers[scratch.depth++].get();
}

scratch_lease::~scratch_lease() { --scratch.depth; }

}  // namespace seriema::fabric::detail
