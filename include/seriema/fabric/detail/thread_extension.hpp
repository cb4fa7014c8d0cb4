// The layer registry: how layers above fabric (invoke's channels and futures, the modules) keep
// per-thread state that every thread_context polls, flushes, tells about dead peers and asks
// for counters, in a fixed order.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace seriema::fabric {

class thread_context;

// Per-thread state of one layer above fabric. Created for every eligible thread_context by the
// factory the layer registered at static-initialization time, so a thread receives the layer's
// traffic even if it never sends any. Owner thread only (the context's).
class thread_extension {
 public:
  thread_extension() noexcept = default;
  virtual ~thread_extension() = default;
  thread_extension(const thread_extension&) = delete;
  thread_extension& operator=(const thread_extension&) = delete;

  // Receives and runs what arrived, and moves queued work on; returns the work done (calls run,
  // continuations fired). Called by every poll of the context while wants_poll() holds.
  virtual std::size_t poll(thread_context& self) = 0;
  // Publishes everything batched locally (aggregators), so that it will be received.
  virtual void flush(thread_context& self) = 0;
  // Some process died (runtime::peer_failed says which): fail what is held for it.
  virtual void peers_failed(thread_context& self) = 0;
  // This thread's counters of the layer as one JSON object (SERIEMA_COUNTERS writes it when
  // run() ends); "{}" when the layer counts nothing.
  [[nodiscard]] virtual std::string counters_json() const { return "{}"; }

  // Whether poll() has anything to do now. A layer that is idle most of the time (futures with
  // no continuation waiting) clears it, so a poll of the context costs it one load, not a call.
  [[nodiscard]] bool wants_poll() const noexcept { return wants_poll_; }

 protected:
  void set_wants_poll(bool wanted) noexcept { wants_poll_ = wanted; }

 private:
  bool wants_poll_ = true;
};
using thread_extension_factory = std::unique_ptr<thread_extension> (*)(thread_context& self);

// The slots of the layers seriema has. A slot is a layer's fixed place in every context (so its
// lookup is one load at a constant offset) and its rank in the order of poll, flush and
// peers_failed: lower slots first. Modules take the next free slot; two layers in one slot abort
// the program at startup with both names.
namespace layer_slot {
inline constexpr std::size_t invoke_channels = 0;  // one-sided messengers (workers only)
inline constexpr std::size_t invoke_futures = 1;   // futures, coroutines, deferred replies
inline constexpr std::size_t containers = 2;       // distributed containers' partitions
inline constexpr std::size_t pipe = 3;             // remote pipes' ends and retiring regions
inline constexpr std::size_t group = 4;            // multicast groups' members and kept regions
inline constexpr std::size_t dsm = 5;              // shared spaces' handles on peers' regions
inline constexpr std::size_t count = 16;           // slots in all
}  // namespace layer_slot

// Which contexts a layer gives state to.
enum class layer_scope : unsigned char {
  workers,               // runtime::run's worker threads
  workers_and_attached,  // those and the threads attached with runtime::attach()
};

// One layer as it registers itself.
struct thread_layer {
  std::string_view name;  // for messages and counters ("invoke.futures")
  std::size_t slot;       // layer_slot::...
  layer_scope scope;
  thread_extension_factory make;
};

// Adds `layer` to the registry; returns its slot. Call before main (a static initializer in the
// layer's source file) or at least before the runtime runs: contexts made earlier lack it. A slot
// beyond layer_slot::count or taken by another layer aborts the program with a message (a
// programming error the first run shows). Thread-safe.
std::size_t register_thread_layer(const thread_layer& layer) noexcept;

// The registered layer in `slot`, or a layer with a null factory.
thread_layer registered_thread_layer(std::size_t slot) noexcept;

}  // namespace seriema::fabric
