// The per-thread table of container partitions: how an operation that arrives at a thread finds
// that thread's part of the container it names (by the id every thread gave the container when
// it was made, in the same order everywhere). The containers layer's thread extension.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fmt/format.h>
#include <seriema/base/error.hpp>
#include <seriema/containers/detail/ask_every_worker.hpp>
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
  /// Whether container `id` here is `object` (the address its maker registered); an operation
  /// that finds it gone is counted and logged (late_operation) as find's.
  bool holds(std::uint32_t id, const void* object) noexcept {
    if (id < entries_.size() && entries_[id].object == object) return true;
    late_operation(id);
    return false;
  }
  /// The container with id `id` is gone from this thread; later operations on it are dropped.
  void remove(std::uint32_t id) noexcept {
    if (id < entries_.size()) entries_[id] = {};
  }
  /// Runs publish(object) whenever the thread flushes its layers (idle waits, the job's quiesce
  /// rounds, flush requests) until removed: a container that batches at the sender (a
  /// counting_set's cache) publishes what it holds, and a barrier counts it.
  void add_flusher(void* object, void (*publish)(void*)) { flushers_.push_back({object, publish}); }
  /// Stops flushing `object`.
  void remove_flusher(void* object) noexcept {
    std::erase_if(flushers_, [object](const flusher& f) { return f.object == object; });
  }
  /// Calls a container operation sends between two polls of make_progress (sent_one).
  static constexpr std::uint32_t sends_per_progress = 128;
  /// Runs the calls this thread received so far (a poll whose exceptions are kept for the
  /// application's next own poll), unless the thread is already inside one of these polls. A
  /// worker that only sends (a loop of updates) would otherwise leave its peers' rings to it
  /// full, and a peer waiting for room (policy::retry) would stall until the loop ended.
  void make_progress(thread_context& self);
  /// One call sent by a container operation: every sends_per_progress of them, make_progress.
  void sent_one(thread_context& self) {
    if (++sent_since_progress_ < sends_per_progress) return;
    sent_since_progress_ = 0;
    make_progress(self);
  }
  /// An operation refused by a part of a `kind` container at its bound (`limit` keys): counted,
  /// the first one logged.
  void refuse(const char* kind, std::size_t limit) noexcept;
  /// Operations refused by parts of this thread at their bounds.
  [[nodiscard]] std::uint64_t refused() const noexcept { return refused_; }
  /// Operations dropped because their container did not exist at their destination.
  [[nodiscard]] std::uint64_t dropped() const noexcept { return dropped_; }

  std::size_t poll(thread_context&) override { return 0; }
  void flush(thread_context&) override {
    for (std::size_t i = 0; i < flushers_.size(); ++i) flushers_[i].flush(flushers_[i].object);
  }
  void peers_failed(thread_context&) override {}
  [[nodiscard]] std::string counters_json() const override;

 private:
  struct entry {
    void* object = nullptr;
    const void* type = nullptr;
  };
  void late_operation(std::uint32_t id) noexcept;

  struct flusher {
    void* object;
    void (*flush)(void*);
  };
  std::vector<entry> entries_;
  std::vector<flusher> flushers_;
  std::uint64_t dropped_ = 0;
  std::uint64_t refused_ = 0;
  std::uint32_t sent_since_progress_ = 0;
  bool making_progress_ = false;  // inside make_progress()
};

/// How containers::post and ask name a container object of their own process: its id, the
/// address its worker's table holds for it (the object itself, or the map a set or counting_set
/// wraps) and that worker.
struct part_key {
  std::uint32_t id = 0;               ///< the container's id, the same on every worker
  const void* registered = nullptr;   ///< what the worker's table holds under `id`
  fabric::thread_id worker = 0;       ///< the worker that made the object
};

/// The containers of `self`'s thread (a worker's); throws seriema::error on a thread without
/// them (a service thread, an attached thread).
container_table& containers_of(thread_context& self);

/// Container `id` on thread `s`; throws seriema::error naming `kind` (the caller's future fails
/// with it) when it does not exist there.
template <class Container>
Container& part_of(thread_context& s, std::uint32_t id, const char* kind) {
  Container* found = containers_of(s).template find<Container>(id);
  if (found == nullptr) {
    throw error(fmt::format("containers::{}: it does not exist on thread {} (destroyed, or the "
                            "threads made their containers in different orders)",
                            kind, s.id()));
  }
  return *found;
}

/// A container's entry in its thread's table, held by the container as its last member (so the
/// rest of it exists before an operation can reach it, and is still there until the entry
/// goes): added when made, then a job-wide quiesce so that every worker's part exists before any
/// operation is sent (a quiesce that throws removes the entry again); removed when destroyed,
/// after which operations that reach it are dropped and counted. Container::kind_name names the
/// kind in errors ("map", "array"...).
template <class Container>
class registration {
 public:
  registration(thread_context& self, Container* container,
               fabric::deadline_clock::time_point deadline)
      : self_(self), object_(container), table_(containers_of(self)), id_(table_.add(container)) {
    try {
      self.quiesce(deadline);
    } catch (...) {
      table_.remove(id_);
      throw;
    }
  }
  ~registration() { table_.remove(id_); }
  registration(const registration&) = delete;
  registration& operator=(const registration&) = delete;

  /// The container's id, the same on every worker.
  [[nodiscard]] std::uint32_t id() const noexcept { return id_; }
  /// The table of the worker that made the container.
  [[nodiscard]] container_table& table() const noexcept { return table_; }
  /// What containers::post and ask name the container by.
  [[nodiscard]] part_key key() const noexcept { return {id_, object_, self_.id()}; }
  /// ask(part) of every worker's part of the container, in thread order, waited for by
  /// `deadline` (throws the first failure as future::get does). `ask` is a remote closure.
  template <class Ask>
  auto ask_every_part(Ask ask, fabric::deadline_clock::time_point deadline) const {
    const std::uint32_t id = id_;
    return ask_every_worker(
        self_,
        [id, ask](thread_context& s) {
          return ask(part_of<Container>(s, id, Container::kind_name));
        },
        deadline);
  }

 private:
  thread_context& self_;
  Container* object_;
  container_table& table_;
  std::uint32_t id_;
};

}  // namespace seriema::containers::detail
