// Must not compile (tests/diagnostics): each function below makes one common mistake with an
// invoke primitive's synchronizer or notify_on, and each must fail with the one sentence in the
// `// expect:` comment above it, never with a list of candidates. check_diagnostics.cmake reads
// these comments: one error per case, each sentence as often as it is expected.
#include <seriema/invoke/invoke.hpp>
#include <span>
#include <string>
#include <vector>

namespace invoke = seriema::invoke;
using invoke::channel;
using invoke::notify_on;
using seriema::fabric::thread_context;

namespace {
seriema::transfer::remote_memory_locator memory{};
std::vector<std::byte> bytes(64);
auto plain = [] {};
auto with_bytes = [](std::span<std::byte>) {};
}  // namespace

// expect: pass the synchronizer itself, not a pointer to it
void synchronizer_by_pointer(thread_context& me, invoke::synchronizer& sync) {
  (void)invoke::call(me, 1, plain, &sync);
}

// expect: pass the synchronizer itself, not a pointer to it
void synchronizer_by_pointer_to_a_broadcast(thread_context& me, invoke::synchronizer& sync) {
  invoke::broadcast(me, plain, &sync);
}

// expect: this argument must be an invoke::synchronizer
void not_a_synchronizer(thread_context& me) {
  (void)invoke::call_buffer_get(me, 1, with_bytes, memory, 42);
}

// expect: this argument must be an invoke::synchronizer
void not_a_synchronizer_after_the_bytes(thread_context& me) {
  (void)invoke::call_buffer(me, 1, with_bytes, bytes, 3.0);
}

// expect: the synchronizer must be a named, non-const synchronizer
void const_synchronizer(thread_context& me, const invoke::synchronizer& sync) {
  invoke::broadcast(me, plain, sync);
}

// expect: a notify_on says when a synchronizer is counted down, but this call names none
void notify_on_without_synchronizer(thread_context& me) {
  (void)invoke::call<channel::write, invoke::policy::fail, notify_on::consume>(me, 1, plain);
}

// expect: a notify_on says when a synchronizer is counted down, but this call names none
void notify_on_on_a_broadcast_without_synchronizer(thread_context& me) {
  invoke::broadcast<channel::write, notify_on::transmit>(me, plain);
}

// expect: the policy comes before notify_on
void notify_on_where_the_policy_goes(thread_context& me, invoke::synchronizer& sync) {
  (void)invoke::call<channel::write, notify_on::consume>(me, 1, plain, sync);
}

// expect: call_buffer_get_async takes no notify_on
void notify_on_given_to_get_async(thread_context& me, invoke::synchronizer& sync) {
  (void)invoke::call_buffer_get_async<channel::write, invoke::policy::fail, notify_on::transmit>(
      me, 1, with_bytes, memory, sync);
}

// expect: call_buffer_put_async takes no policy
void policy_given_to_put_async(thread_context& me, invoke::synchronizer& sync) {
  (void)invoke::call_buffer_put_async<channel::write, invoke::policy::retry>(me, 1, with_bytes,
                                                                             bytes, memory, sync);
}

// expect: call_buffer_put_async needs a synchronizer
void put_async_without_synchronizer(thread_context& me) {
  (void)invoke::call_buffer_put_async(me, 1, with_bytes, bytes, memory);
}

// expect: the synchronizer goes right after the function, before the arguments
void synchronizer_after_the_arguments(thread_context& me, invoke::synchronizer& sync) {
  (void)invoke::call(me, 1, [](int) {}, 7, sync);
}
