// The per-thread table of container partitions: how an operation that arrives at a thread finds
// that thread's part of the container it names (by the id every thread gave the container when
// it was made, in the same order everywhere). The containers layer's thread extension.
#pragma once

#include <cstddef>
#include <cstdint>
#include <seriema/fabric/detail/thread_extension.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <string>
#include <vector>

namespace seriema::containers::detail {

using fabric::thread_context;

/// A container type's token: the address of one variable per type (compared, never read).
template <class Container>
const void* type_token() noexcept {
  static const char token = 0;
  return &token;
}

/// The thread's containers, by id. Owner thread only (the context's): a container is made,
/// looked up and removed on its owner thread, and operations run there.
class container_table final : public fabric::thread_extension {
 public:
  container_table() { set_wants_poll(false); }

  /// Adds `object` (a Container) under the next id; containers made in the same order on every
  /// thread get the same id everywhere.
  template <class Container>
  std::uint32_t add(Container* object) {
    entries_.push_back({object, type_token<Container>()});
    return static_cast<std::uint32_t>(entries_.size() - 1);
  }
  /// The Container with id `id` on this thread, or null when it does not exist here (not made
  /// yet, destroyed, or made as another type: a program whose threads made containers in
  /// different orders). A null answer is counted and logged once (late_operation).
  template <class Container>
  Container* find(std::uint32_t id) noexcept {
    if (id < entries_.size() && entries_[id].type == type_token<Container>()) {
      return static_cast<Container*>(entries_[id].object);
    }
    late_operation(id);
    return nullptr;
  }
  /// The container with id `id` is gone from this thread; later operations on it are dropped.
  void remove(std::uint32_t id) noexcept {
    if (id < entries_.size()) entries_[id] = {};
  }
  /// Operations dropped because their container did not exist at their destination.
  [[nodiscard]] std::uint64_t dropped() const noexcept { return dropped_; }

  std::size_t poll(thread_context&) override { return 0; }
  void flush(thread_context&) override {}
  void peers_failed(thread_context&) override {}
  [[nodiscard]] std::string counters_json() const override;

 private:
  struct entry {
    void* object = nullptr;
    const void* type = nullptr;
  };
  void late_operation(std::uint32_t id) noexcept;

  std::vector<entry> entries_;
  std::uint64_t dropped_ = 0;
};

/// The containers of `self`'s thread (a worker's); throws seriema::error on a thread without
/// them (a service thread, an attached thread).
container_table& containers_of(thread_context& self);

}  // namespace seriema::containers::detail
