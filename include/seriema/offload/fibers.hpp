// Boost.Fiber requesters: while a fiber_waits lives on a thread that runs fibers, an offload
// future's wait on that thread yields to its other fibers instead of blocking the OS thread.
#pragma once

#include <boost/fiber/operations.hpp>
#include <seriema/offload/engine.hpp>

namespace seriema::offload {

/// Yields the running fiber to the others of its thread (what a waiting future does).
inline void yield_this_fiber() { boost::this_fiber::yield(); }

/// Make one on each OS thread that runs fibers making offload requests (before they wait):
/// their waits then yield to the thread's scheduler (a fiber that waits lets the others run,
/// and is resumed by its scheduler to look again). Thread-local; scopes nest.
class fiber_waits : public wait_hook_scope {
 public:
  fiber_waits() noexcept : wait_hook_scope(&yield_this_fiber) {}
};

}  // namespace seriema::offload
