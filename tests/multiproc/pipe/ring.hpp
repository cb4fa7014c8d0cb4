// The ring of workers the pipe tests open their pipes along: each writes to the next and reads
// from the previous; and the deadline of one phase of a test.
#pragma once

#include <chrono>
#include <seriema/fabric/thread_context.hpp>

namespace seriema::test {

inline constexpr auto phase_deadline = std::chrono::seconds(60);

inline fabric::thread_id next_of(const fabric::thread_context& me) {
  return (me.id() + 1) % me.thread_count();
}
inline fabric::thread_id previous_of(const fabric::thread_context& me) {
  return (me.id() + me.thread_count() - 1) % me.thread_count();
}

}  // namespace seriema::test
