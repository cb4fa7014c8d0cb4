// seriema::task<T>: the coroutine type of seriema programs. A task starts when awaited or
// spawned, runs on the thread that started it and resumes there (inside a poll) when what it
// awaits ended: no extra thread, no system call. Its frame comes from a per-thread free list.
// spawn() runs one detached and gives a future of its result; runtime::run takes a body that is
// a task; a called function that returns a task (or a future) makes a deferred reply.
#pragma once

#include <coroutine>
#include <cstddef>
#include <exception>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/future.hpp>
#include <type_traits>
#include <utility>
#include <variant>

namespace seriema::invoke {

namespace detail {

/// A coroutine frame of `size` bytes from this thread's free list of its size class (frames
/// above 4 KiB come from operator new). Freed frames go back to the freeing thread's list.
void* allocate_frame(std::size_t size);
void free_frame(void* frame, std::size_t size) noexcept;

/// A spawned task's completion: the record its future holds, in its thread's table.
struct spawn_target {
  future_table* table = nullptr;
  future_record* record = nullptr;
};

/// Counts a spawned task (or deferred reply) as in progress for run()'s and quiesce's
/// termination, and as finished again (the runtime's deferred_started / deferred_finished).
void note_deferred_started(thread_context& self) noexcept;
void note_deferred_finished(thread_context& self) noexcept;

/// A task's result as its promise keeps it, and how the coroutine gives it (co_return value;
/// or co_return; / running off the end): a promise may declare only one of the two.
template <class T>
class task_result {
 public:
  template <class U>
    requires std::is_convertible_v<U &&, T>
  void return_value(U&& value) {
    result_.template emplace<1>(std::forward<U>(value));
  }

 protected:
  // 0: not finished; 1: the value; 2: the exception.
  std::variant<std::monostate, T, std::exception_ptr> result_;
};
template <>
class task_result<void> {
 public:
  void return_void() noexcept { result_.emplace<1>(); }

 protected:
  std::variant<std::monostate, unit, std::exception_ptr> result_;
};

}  // namespace detail

/// A coroutine that gives a T (or nothing). Lazy: it starts when awaited (`co_await t`, the
/// awaiting coroutine resumes when it returns) or spawned (spawn(me, std::move(t))). Move-only;
/// destroying a task that never started destroys its frame. A task resumes only on the thread
/// that started it, inside that thread's polls; hold no deadline_scope across a co_await (the
/// scope belongs to the thread, not the coroutine): give the awaited future with_deadline.
template <class T = void>
class [[nodiscard]] task {
 public:
  /// @cond INTERNAL
  /// The coroutine's promise (the machinery of co_await, co_return and spawn).
  class promise_type : public detail::task_result<T> {
   public:
    task get_return_object() noexcept {
      return task(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    /// At the end: a spawned task ends its future and frees its frame; an awaited one resumes
    /// the coroutine that awaits it.
    struct final_awaiter {
      bool await_ready() const noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> done) noexcept {
        promise_type& p = done.promise();
        if (p.spawned_.record != nullptr) {
          p.finish_spawned();
          done.destroy();
          return std::noop_coroutine();
        }
        return p.continuation_ ? p.continuation_ : std::noop_coroutine();
      }
      void await_resume() const noexcept {}
    };
    final_awaiter final_suspend() noexcept { return {}; }
    void unhandled_exception() noexcept {
      this->result_.template emplace<2>(std::current_exception());
    }

    static void* operator new(std::size_t size) { return detail::allocate_frame(size); }
    static void operator delete(void* frame, std::size_t size) noexcept {
      detail::free_frame(frame, size);
    }

    /// @cond INTERNAL
    void set_continuation(std::coroutine_handle<> waiting) noexcept { continuation_ = waiting; }
    void set_spawned(detail::spawn_target target) noexcept { spawned_ = target; }
    /// The result, moved out: the value, or the exception rethrown.
    detail::value_of<T> take() {
      if (this->result_.index() == 2) std::rethrow_exception(std::get<2>(this->result_));
      return std::move(std::get<1>(this->result_));
    }
    /// @endcond

   private:
    friend class task;
    void finish_spawned() noexcept {
      detail::future_table& table = *spawned_.table;
      detail::future_record& r = *spawned_.record;
      thread_context& self = table.self();
      try {
        if (this->result_.index() == 2) {
          detail::fail_with(table, r, std::get<2>(this->result_));
        } else {
          detail::fulfil<detail::value_of<T>>(table, r, std::move(std::get<1>(this->result_)));
        }
      } catch (...) {  // the value's move threw: the future says so
        detail::fail_with(table, r, std::current_exception());
      }
      detail::note_deferred_finished(self);
    }

    std::coroutine_handle<> continuation_;
    detail::spawn_target spawned_;
  };

  /// @endcond

  /// Takes over `other`'s coroutine (`other` is empty afterwards).
  task(task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  /// Destroys this task's coroutine if it never started, then takes over `other`'s.
  task& operator=(task&& other) noexcept {
    if (this != &other) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  task(const task&) = delete;
  task& operator=(const task&) = delete;
  ~task() {
    if (handle_) handle_.destroy();
  }

  /// co_await a task: it starts now, on this thread; the awaiting coroutine resumes when it
  /// returned (its value) or threw (rethrown).
  bool await_ready() const noexcept { return false; }
  /// Starts the task (symmetric transfer), noting who resumes when it ends.
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> waiting) noexcept {
    handle_.promise().set_continuation(waiting);
    return handle_;
  }
  /// The task's value, or its exception rethrown.
  T await_resume() {
    if constexpr (std::is_void_v<T>) {
      (void)handle_.promise().take();
    } else {
      return handle_.promise().take();
    }
  }

  /// @cond INTERNAL
  /// Lets go of the coroutine (spawn: it frees itself when it ends).
  std::coroutine_handle<promise_type> release() noexcept { return std::exchange(handle_, {}); }
  /// @endcond

 private:
  explicit task(std::coroutine_handle<promise_type> handle) noexcept : handle_(handle) {}
  std::coroutine_handle<promise_type> handle_;
};

namespace detail {

template <class T>
future<T> spawn_on(future_table& table, task<T>&& t) {
  future<T> out = make_local_future<T>(table);
  auto handle = t.release();
  handle.promise().set_spawned({&table, out.record()});
  note_deferred_started(table.self());
  handle.resume();  // runs until its first suspension (or to its end)
  return out;
}

}  // namespace detail

/// Runs `t` detached on `self`'s thread: it starts now and runs until it first waits; it resumes
/// in later polls of this thread. The returned future ends with its value or exception (an
/// exception nobody looks at is counted and logged once, as for any failed future). runtime::run
/// and quiesce wait for spawned tasks to end.
template <class T>
future<T> spawn(thread_context& self, task<T>&& t) {
  return detail::spawn_on(detail::futures_of(self), std::move(t));
}

/// runtime::run's driver for a body that is a coroutine: spawns it, serves calls until it ended,
/// then rethrows what it threw (found by argument-dependent lookup from fabric's runtime::run).
void drive_body(task<void>&& body, thread_context& self);

}  // namespace seriema::invoke

namespace seriema {
using invoke::future;  // NOLINT: the library's public names (seriema::future, seriema::task)
using invoke::task;
}  // namespace seriema
