// Offload futures where the rest of seriema waits: as a future of a worker's (or attached
// thread's) own table, so a coroutine task co_awaits it and then / when_all take it, ending in
// that thread's polls once the request ended.
#pragma once

#include <seriema/invoke/future.hpp>
#include <seriema/offload/engine.hpp>

namespace seriema::offload {

/// @cond INTERNAL
namespace detail {

/// Drives an invoke record from an offload future: each look (a wait, a co_await's scan, a
/// combinator) reads the offload record, and the first that finds it ended ends the invoke
/// record with its value or failure (outcome kept).
template <class T>
struct offload_bridge : invoke::detail::combinator<offload_bridge<T>> {
  future<T> source;

  bool advance() {
    source.progress();
    if (!source.ready()) return false;
    this->table->note_advanced();
    invoke::detail::future_record& ending = *this->out;
    const fabric::outcome how = source.result();
    // This runs inside the table's noexcept look (ended()): nothing may leave it.
    fabric::outcome end_as = how;
    try {
      if (how == fabric::outcome::done) {
        if constexpr (std::is_void_v<T>) {
          source.get();
          invoke::detail::fulfil<invoke::detail::value_of<void>>(*this->table, ending);
        } else {
          invoke::detail::fulfil<T>(*this->table, ending, source.get());
        }
        return this->done();
      }
      source.get();  // throws the failure it ended with
    } catch (...) {
      if (how == fabric::outcome::done) end_as = fabric::outcome::not_executed;  // T's move threw
      if (ending.outcome() == fabric::outcome::pending && ending.held) {
        ending.cold = true;
        ending.error = std::current_exception();
      }
    }
    this->table->complete(ending, end_as);
    return this->done();
  }
};

}  // namespace detail
/// @endcond

/// `f` as a future of `self`'s thread (invoke::future<T>): `co_await` it in a task<T> (the
/// coroutine resumes in one of self's polls once the request ended), chain it with then, wait
/// for it with when_all, or wait() / get() it while serving calls. Its failure is the offload
/// future's: the same outcome, and get() throws the same exception. Consumes `f`. Owner thread
/// of `self` only.
template <class T>
invoke::future<T> on(fabric::thread_context& self, future<T>&& f) {
  invoke::detail::future_table& table = invoke::detail::futures_of(self);
  auto out = invoke::detail::make_local_future<T>(table);
  auto* node = new detail::offload_bridge<T>;
  node->source = std::move(f);
  detail::offload_bridge<T>::install(node, *out.record(), table);
  return out;
}

}  // namespace seriema::offload
