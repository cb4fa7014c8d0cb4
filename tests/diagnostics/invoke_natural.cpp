// Must compile (tests/diagnostics): every invoke primitive that takes a synchronizer, written the
// natural way (no template arguments; the synchronizer counts calls that ran), and with them.
#include <seriema/invoke/invoke.hpp>
#include <span>
#include <string>
#include <vector>

namespace invoke = seriema::invoke;
using invoke::channel;
using invoke::notify_on;
using seriema::fabric::thread_context;

void natural_spellings(thread_context& me, invoke::thread_id dest,
                       const seriema::transfer::remote_memory_locator& memory,
                       std::span<const seriema::transfer::remote_memory_locator> targets) {
  invoke::synchronizer sync(me, 16);
  std::vector<std::byte> bytes(64);
  seriema::fabric::return_slot<int> slot;
  auto plain = [] {};
  auto with_bytes = [](std::span<std::byte>) {};
  auto returning = [] { return 1; };
  auto with_text = [](const std::string&) {};
  (void)invoke::call(me, dest, plain, sync);
  (void)invoke::call(me, dest, with_text, sync, std::string("text"));
  (void)invoke::call(me, dest, with_text, std::string("no synchronizer"));
  (void)invoke::call_buffer(me, dest, with_bytes, bytes, sync);
  (void)invoke::call_buffer(me, dest, with_bytes, bytes, memory, sync);
  (void)invoke::call_buffer(me, dest, with_bytes, bytes, memory);
  (void)invoke::call_return(me, dest, returning, slot, sync);
  (void)invoke::call_buffer_put_async(me, dest, with_bytes, bytes, memory, sync);
  (void)invoke::call_buffer_get(me, dest, with_bytes, memory, sync);
  (void)invoke::call_buffer_get_async(me, dest, with_bytes, memory, sync);
  invoke::broadcast(me, plain, sync);
  invoke::broadcast_buffer(me, with_bytes, bytes, sync);
  (void)invoke::broadcast_buffer(me, with_bytes, bytes, targets, sync);
  (void)invoke::broadcast_buffer(me, with_bytes, bytes, targets);
  invoke::broadcast_buffer_get(me, with_bytes, memory, sync);
  // Explicit template arguments, as before: transmit and consume, channel and policy.
  (void)invoke::call<channel::trad, invoke::policy::retry, notify_on::transmit>(me, dest, plain,
                                                                                 sync);
  (void)invoke::call<channel::send>(me, dest, plain, sync);
  (void)invoke::call_buffer_put_async<channel::write, notify_on::transmit>(me, dest, with_bytes,
                                                                          bytes, memory, sync);
  invoke::broadcast<channel::trad, notify_on::transmit>(me, plain, sync);
  (void)sync.wait();
}
