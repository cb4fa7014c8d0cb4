// What a future's get() throws when the call did not give a value: one error type per outcome
// class, and remote_error for the called function's own exception (its type name and what() as
// the callee saw them). Exception types registered on both sides come back as themselves.
#pragma once

#include <cstdint>
#include <exception>
#include <seriema/base/error.hpp>
#include <seriema/fabric/outcome.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace seriema::invoke {

/// A call_return whose future did not end with a value: why (the outcome), what the send
/// returned, and where the call went. Thrown by future::get() and co_await; one subclass per
/// outcome, so that `catch (const may_have_executed_error&)` is told apart from
/// `catch (const not_executed_error&)`.
class call_error : public seriema::error {
 public:
  /// An error for a call to `destination` (of process `process`) that ended with `why`, whose
  /// send returned `status`; `text` is the message (what()).
  call_error(const std::string& text, fabric::outcome why, fabric::call_status status,
             fabric::thread_id destination, int process)
      : seriema::error(text), outcome_(why), status_(status), destination_(destination),
        process_(process) {}
  /// How the call ended (never done or pending).
  [[nodiscard]] fabric::outcome outcome() const noexcept { return outcome_; }
  /// What sending the call returned (ok unless the call never left: then not_executed).
  [[nodiscard]] fabric::call_status status() const noexcept { return status_; }
  /// The thread the call went to.
  [[nodiscard]] fabric::thread_id destination() const noexcept { return destination_; }
  /// Its process (rank).
  [[nodiscard]] int process() const noexcept { return process_; }

 private:
  fabric::outcome outcome_;
  fabric::call_status status_;
  fabric::thread_id destination_;
  int process_;
};

/// The call provably never ran: it was not sent (status() says why), dropped before it was
/// published, its function is unknown at the destination, or its reply did not deserialize.
class not_executed_error : public call_error {
 public:
  using call_error::call_error;
};
/// The destination's process died after the call was sent: it ran at most once.
class may_have_executed_error : public call_error {
 public:
  using call_error::call_error;
};
/// The wait's deadline passed first (the call may still run; its late reply is dropped).
class deadline_exceeded_error : public call_error {
 public:
  using call_error::call_error;
};
/// The future was cancelled (the call may still run; its late reply is dropped).
class cancelled_error : public call_error {
 public:
  using call_error::call_error;
};

/// The called function threw at the destination, and its exception's type is not one this
/// process rebuilds (register_remote_exception): the type's name and what() as the callee saw
/// them. what() reads "call to thread 3 (rank 1) threw std::out_of_range: unordered_map::at".
/// A registered type is thrown as itself instead, with a remote_error nested in it
/// (std::rethrow_if_nested gives it back).
class remote_error : public call_error {
 public:
  /// The callee's exception, `type_name` (demangled) with `remote_what` as its what().
  remote_error(const std::string& text, fabric::call_status status,
               fabric::thread_id destination, int process, std::string type_name,
               std::string remote_what)
      : call_error(text, fabric::outcome::threw, status, destination, process),
        type_name_(std::move(type_name)), remote_what_(std::move(remote_what)) {}
  /// The exception's type at the callee, demangled ("std::out_of_range"); "unknown (not a
  /// std::exception)" for other thrown values.
  [[nodiscard]] const std::string& type_name() const noexcept { return type_name_; }
  /// The exception's what() at the callee (at most 1 KiB of it).
  [[nodiscard]] const std::string& remote_what() const noexcept { return remote_what_; }

 private:
  std::string type_name_;
  std::string remote_what_;
};

namespace detail {

/// How a registered exception type is rebuilt from its what() text.
using exception_thrower = void (*)(const std::string& what);
/// Whether `thrown` holds an exception of the registered type (or one derived from it).
using exception_matcher = bool (*)(const std::exception_ptr& thrown);

/// Registers `type_name` (the mangled typeid name) with its thrower and matcher; throws
/// seriema::error when the name's id is taken by another name.
void add_remote_exception(const char* type_name, exception_thrower thrower,
                          exception_matcher matcher);

/// Throws an E made from `what`, with the exception being handled (the remote_error) nested
/// in it (std::throw_with_nested; an E that is final gets nothing nested).
template <class E>
[[noreturn]] void throw_as(const std::string& what) {
  if constexpr (std::is_constructible_v<E, const std::string&>) {
    std::throw_with_nested(E(what));
  } else {
    std::throw_with_nested(E());
  }
}

template <class E>
bool holds(const std::exception_ptr& thrown) {
  try {
    std::rethrow_exception(thrown);
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

/// Bytes describing the exception being handled (call only inside a catch block): its registered
/// id (0: none), its demangled type name and its what(), cut to 1 KiB. Appended to `out`.
void describe_current_exception(std::vector<std::byte>& out);

/// The exception a failure's details describe, rebuilt: a registered type thrown as itself with
/// a remote_error nested (std::throw_with_nested), else the remote_error. Details that do not
/// parse (a peer's bad bytes, or none) give a remote_error of unknown type.
std::exception_ptr rebuild_remote_exception(std::span<const std::byte> details,
                                            fabric::call_status status,
                                            fabric::thread_id destination, int process);

/// The exception get() throws for a call that ended with `why` (anything but done and threw).
std::exception_ptr outcome_exception(fabric::outcome why, fabric::call_status status,
                                     fabric::thread_id destination, int process);

}  // namespace detail

/// Registers exception type E so that, thrown by a called function, it is thrown again as E at
/// a caller in this process (`catch (const E&)` works there) instead of as a remote_error. E
/// must be constructible from its what() text (or default constructible). Register it in every
/// process of the job before the runtime starts; the standard exceptions (std::logic_error,
/// invalid_argument, domain_error, length_error, out_of_range, runtime_error, range_error,
/// overflow_error, underflow_error, bad_alloc) are registered already. An exception of a type
/// derived from a registered one (but not registered itself) comes back as the nearest
/// registered base, the remote_error nested in it naming the real type.
template <class E>
void register_remote_exception() {
  static_assert(std::is_base_of_v<std::exception, E>,
                "register_remote_exception: E must derive from std::exception");
  static_assert(std::is_constructible_v<E, const std::string&> ||
                    std::is_default_constructible_v<E>,
                "register_remote_exception: E must be constructible from its what() text");
  detail::add_remote_exception(typeid(E).name(), &detail::throw_as<E>, &detail::holds<E>);
}

}  // namespace seriema::invoke
