// Container operations from any thread of the job (an attached thread, a pool thread, main):
// forwarded to the worker of the same process that made the container object, which makes them
// as its own.
#pragma once

#include <fmt/format.h>

#include <seriema/base/error.hpp>
#include <seriema/containers/detail/container_table.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/invoke.hpp>

namespace seriema::containers {

/// Makes op(c, args...) on container object `c` at the worker that made it (c.self(), in this
/// process), from the thread whose context is `from` (an attached thread's, or another
/// worker's): one send-based call there (channel::send, policy::retry: it waits for room), after
/// which the worker makes the operation as its own (its channel and order). Returns that call's
/// call_status. `op` is a closure (trivially copyable; a lambda with no captures, or captures
/// of numbers) that takes the container and the arguments (values of any type cereal
/// serializes, which travel serialized); what it returns is dropped, and what it throws is the
/// worker's (a call's exception, thrown at the worker's next poll): use ask to see it. When c
/// is gone by then, the operation is dropped and counted (as an operation that reaches a
/// destroyed part). Updates posted before a thread joined the workers' barrier are applied
/// after that barrier (the job's quiesce counts the forwarding call).
template <class Container, class Op, class... Args>
invoke::call_status post(fabric::thread_context& from, Container& c, Op op, const Args&... args) {
  const detail::part_key key = c.part_key();
  Container* object = &c;  // the same process: the call goes to the object's own worker
  return invoke::call<invoke::channel::send, invoke::policy::retry>(
      from, key.worker,
      [key, object, op](fabric::thread_context& s, Args&... a) {
        if (detail::containers_of(s).holds(key.id, key.registered)) (void)op(*object, a...);
      },
      args...);
}

/// As post, and the future of what op returns: a value, or the value of a future op returns
/// (c.find(key), c.get(i): the worker answers once it ended, serving other calls meanwhile).
/// What op throws, or a container that is gone, fails the future (get() throws it).
template <class Container, class Op, class... Args>
auto ask(fabric::thread_context& from, Container& c, Op op, const Args&... args) {
  const detail::part_key key = c.part_key();
  Container* object = &c;
  return invoke::call_return<invoke::channel::send, invoke::policy::retry>(
      from, key.worker,
      [key, object, op](fabric::thread_context& s, Args&... a) {
        if (!detail::containers_of(s).holds(key.id, key.registered)) {
          throw error(fmt::format("containers::ask: container {} is gone from thread {}", key.id,
                                  s.id()));
        }
        return op(*object, a...);
      },
      args...);
}

}  // namespace seriema::containers
