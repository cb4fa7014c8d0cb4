// The hook through which a layer above fabric (invoke) keeps per-thread state that every
// thread_context polls, flushes and tells about dead peers.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace seriema::fabric {

class thread_context;

// Per-thread state of a layer above fabric (the invoke layer's messengers). Created for every
// worker thread_context by the factory that layer installs at static-initialization time, so a
// thread receives one-sided calls even if it never sends one. Owner thread only.
class thread_extension {
 public:
  // `kind`: an address unique to the layer's class, so that the layer finds its own extension
  // with a pointer compare instead of a dynamic_cast on every call.
  explicit thread_extension(const void* kind) noexcept : kind_(kind) {}
  virtual ~thread_extension() = default;
  [[nodiscard]] const void* kind() const noexcept { return kind_; }
  // Receives and runs what arrived, and moves queued work on; returns the number of calls run.
  virtual std::size_t poll(thread_context& self) = 0;
  // Publishes everything batched locally (aggregators), so that it will be received.
  virtual void flush(thread_context& self) = 0;
  // Some process died (runtime::peer_failed says which): fail what is held for it.
  virtual void peers_failed(thread_context& self) = 0;
  // This thread's counters of the layer as one JSON object (SERIEMA_COUNTERS writes it when
  // run() ends); "{}" when the layer counts nothing.
  [[nodiscard]] virtual std::string counters_json() const { return "{}"; }

 private:
  const void* kind_;
};
using thread_extension_factory = std::unique_ptr<thread_extension> (*)(thread_context& self);
// Installs the factory (one layer; the last install wins). Call before runtime::run.
void install_thread_extension(thread_extension_factory factory) noexcept;

}  // namespace seriema::fabric
