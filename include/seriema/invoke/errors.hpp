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

/// Where an exception rebuilt at the caller came from: the called function's thread, its
/// process, and the exception's type and what() as the callee saw them. Every exception a
/// future gives for outcome::threw is one: remote_error, and the registered types, which are
/// thrown as a type derived from both the registered one and this (origin_of() finds it).
class remote_origin {
 public:
  /// The origin of an exception thrown by the function on `destination` (of `process`).
  remote_origin(fabric::thread_id destination, int process, std::string type_name,
                std::string remote_what)
      : origin_destination_(destination), origin_process_(process),
        type_name_(std::move(type_name)), remote_what_(std::move(remote_what)) {}
  virtual ~remote_origin() = default;
  remote_origin(const remote_origin&) = default;             ///< a copy
  remote_origin& operator=(const remote_origin&) = default;  ///< a copy
  /// The thread whose function threw.
  [[nodiscard]] fabric::thread_id origin_thread() const noexcept { return origin_destination_; }
  /// Its process (rank).
  [[nodiscard]] int origin_process() const noexcept { return origin_process_; }
  /// The exception's type at the callee, demangled ("std::out_of_range"); "<type> (not a
  /// std::exception)" for other thrown values.
  [[nodiscard]] const std::string& type_name() const noexcept { return type_name_; }
  /// The exception's what() at the callee (at most 1 KiB of it).
  [[nodiscard]] const std::string& remote_what() const noexcept { return remote_what_; }

 private:
  fabric::thread_id origin_destination_;
  int origin_process_;
  std::string type_name_;
  std::string remote_what_;
};

/// The remote origin of `e` when a future rebuilt it from the callee's exception, else null.
template <class E>
const remote_origin* origin_of(const E& e) noexcept {
  return dynamic_cast<const remote_origin*>(&e);
}

/// The called function threw at the destination, and its exception's type is not one this
/// process rebuilds (register_remote_exception): the type's name and what() as the callee saw
/// them. what() reads "call to thread 3 (rank 1) threw my::error: the text". A registered type
/// is thrown as itself instead (with its remote_origin: origin_of()).
class remote_error : public call_error, public remote_origin {
 public:
  /// The callee's exception, `type_name` (demangled) with `remote_what` as its what().
  remote_error(const std::string& text, fabric::call_status status,
               fabric::thread_id destination, int process, std::string type_name,
               std::string remote_what)
      : call_error(text, fabric::outcome::threw, status, destination, process),
        remote_origin(destination, process, std::move(type_name), std::move(remote_what)) {}
};

namespace detail {

/// Makes the registered type's exception from its what() text and origin (without throwing).
using exception_maker = std::exception_ptr (*)(const std::string& what,
                                               const remote_origin& origin);
/// Whether `thrown` holds an exception of the registered type (or one derived from it).
using exception_matcher = bool (*)(const std::exception_ptr& thrown);

/// Registers `type_name` (the mangled typeid name) with its maker and matcher; throws
/// seriema::error when the name's id is taken by another name.
void add_remote_exception(const char* type_name, exception_maker maker,
                          exception_matcher matcher);

/// E made from the callee's what() text (or default constructed when E takes none).
template <class E>
E made_from(const std::string& what) {
  if constexpr (std::is_constructible_v<E, const std::string&>) {
    return E(what);
  } else {
    return E();
  }
}

/// A registered E as the caller throws it: E (made from the callee's what()) and its origin.
template <class E>
class rebuilt final : public E, public remote_origin {
 public:
  rebuilt(const std::string& what, const remote_origin& origin)
      : E(made_from<E>(what)), remote_origin(origin) {}
};

template <class E>
std::exception_ptr make_rebuilt(const std::string& what, const remote_origin& origin) {
  if constexpr (std::is_final_v<E>) {
    return std::make_exception_ptr(made_from<E>(what));  // E cannot carry its origin
  } else {
    return std::make_exception_ptr(rebuilt<E>(what, origin));
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

/// Bytes describing the exception being handled (call only inside a catch block; `caught` is it
/// when it is a std::exception, else null): its registered id (0: none), its demangled type name
/// and its what(), cut to 1 KiB. Appended to `out`. Throws nothing itself.
void describe_current_exception(std::vector<std::byte>& out, const std::exception* caught);

/// The exception a failure's details describe, rebuilt (without throwing): a registered type as
/// rebuilt<E>, else a remote_error. Details that do not parse (a peer's bad bytes, or none) give
/// a remote_error of unknown type.
std::exception_ptr rebuild_remote_exception(std::span<const std::byte> details,
                                            fabric::call_status status,
                                            fabric::thread_id destination, int process);

/// "std::out_of_range: key 17" for a failure's details ("" when they do not parse).
std::string summarize_remote_exception(std::span<const std::byte> details);

/// The exception get() throws for a call that ended with `why` (anything but done and threw).
std::exception_ptr outcome_exception(fabric::outcome why, fabric::call_status status,
                                     fabric::thread_id destination, int process);

}  // namespace detail

/// Registers exception type E so that, thrown by a called function, it is thrown again as E at
/// a caller in this process (`catch (const E&)` works there; origin_of(e) tells where it was
/// thrown) instead of as a remote_error. E must be constructible from its what() text (or default
/// constructible). Register it in every
/// process of the job before the runtime starts; the standard exceptions (std::logic_error,
/// invalid_argument, domain_error, length_error, out_of_range, runtime_error, range_error,
/// overflow_error, underflow_error, bad_alloc) are registered already. An exception of a type
/// derived from a registered one (but not registered itself) comes back as the nearest
/// registered base, its origin naming the real type.
template <class E>
void register_remote_exception() {
  static_assert(std::is_base_of_v<std::exception, E>,
                "register_remote_exception: E must derive from std::exception");
  static_assert(std::is_constructible_v<E, const std::string&> ||
                    std::is_default_constructible_v<E>,
                "register_remote_exception: E must be constructible from its what() text");
  detail::add_remote_exception(typeid(E).name(), &detail::make_rebuilt<E>, &detail::holds<E>);
}

}  // namespace seriema::invoke
