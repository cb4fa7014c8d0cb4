// Function identity for remote invocation: every lambda type used remotely gets a job-wide id
// (a hash of its mangled type name, registered at static-initialization time through
// function_wrapper<F, Shape>), applications may register functions under ids of their own, and
// the registry's fingerprint lets the runtime refuse a job whose processes disagree.
#pragma once

#include <array>
#include <seriema/fabric/outcome.hpp>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <vector>

namespace seriema::fabric {

class thread_context;
/// Job-wide id of a remotely callable function (the same in every process of one binary).
using function_id = std::uint32_t;
/// Ids with this bit set are chosen by the application (register_function); the others are
/// derived from type names.
inline constexpr function_id user_function_bit = 0x8000'0000u;

/// A call_return's reply as the function's wrapper may shape it (layers above: futures). The
/// receive path makes one for every call that expects a reply and sends, after the function
/// returned: nothing when `deferred` (the wrapper sends the reply itself later,
/// thread_context::send_reply_value / send_failure), a failure when `result` is threw or
/// not_executed (carrying `details`: what the caller's future learns of an exception), else the
/// value in invocation::result.
struct reply_channel {
  std::uint32_t slot = 0;        ///< the caller's reply slot (cell or table entry)
  std::uint32_t generation = 0;  ///< and its generation
  outcome result = outcome::done;      ///< done, threw or not_executed
  std::span<const std::byte> details;  ///< a failure's details (may be empty)
  bool deferred = false;               ///< the wrapper answers later
  /// A function of variable_result_size: a buffer the receive path leased for the reply's bytes,
  /// valid until the reply went (its send may wait and run calls that make replies too).
  std::vector<std::byte>* storage = nullptr;
};

/// What a function receives when it runs on its destination thread.
struct invocation {
  thread_context* self = nullptr;       ///< the executing thread (null only in unit tests)
  std::uint32_t source = 0;             ///< global id of the calling thread
  std::span<std::byte> buffer;          ///< call_buffer: the buffer that came with the call
  /// call_return: storage for the return value. A wrapper whose value has no fixed size
  /// (result_size == variable_result_size) points it at the bytes to send instead.
  std::span<std::byte> result;
  reply_channel* reply = nullptr;       ///< call_return: the reply being made (else null)
};

/// function_entry::result_size of a function whose reply is any number of bytes (a serialized
/// value): its caller waits in a reply-table entry that takes whatever arrives.
inline constexpr std::uint32_t variable_result_size = 0xFFFF'FFFFu;

/// Runs the function whose closure bytes start at `closure` (closure_size bytes, as registered).
using invoker_fn = void (*)(const std::byte* closure, invocation& call);
/// Runs closures `next` .. `count` - 1 of a run of `count` closures of one function laid back to
/// back, closure_stride(closure_size) bytes apart (a one-sided record that repeats its function),
/// each with a copy of `call`. `next` is advanced before each closure starts, so when a function
/// throws it names the first closure that has not started: running the rest later resumes there.
using repeated_invoker_fn = void (*)(const std::byte* closures, std::uint32_t count,
                                     const invocation& call, std::uint32_t& next);

/// Distance between the starts of consecutive closures of one function in a run: the closure's
/// size rounded up to 8 bytes (so that every closure starts as aligned as a record).
constexpr std::uint64_t closure_stride(std::uint64_t closure_size) noexcept {
  return (closure_size + 7) & ~std::uint64_t{7};
}

/// One registered function: what the receive path needs to check and run a call naming it.
struct function_entry {
  function_id id = 0;          ///< job-wide id (type-derived, or user_function_bit | chosen id)
  std::string name;            ///< mangled type name or the application's name
  invoker_fn invoke = nullptr;  ///< runs one call
  repeated_invoker_fn invoke_repeated = nullptr;  ///< runs a run of calls (repeated records)
  std::uint32_t closure_size = 0;  ///< bytes of the closure a call carries
  std::uint32_t result_size = 0;  ///< call_return: bytes of the return value; 0 otherwise
};

/// How type-derived ids are made (SERIEMA_FUNCTION_IDS, read once before main): a fold of the
/// type name's hash, or the offset of the function's invoker in the binary that holds it (the
/// paper's address-based ids: unique by construction, meaningful only between processes that
/// run the same binary, which the runtime checks at start).
enum class function_id_mode : std::uint8_t { hash, address };

/// The process-wide registry. Registration happens before main (static initialization) or
/// before the runtime starts; the runtime then freezes it, and lookups are lock-free reads of
/// an immutable table. Thread-safety: add() before freeze() from one thread at a time (static
/// init); find() after freeze() from any thread.
class function_registry {
 public:
  static function_registry& instance();  ///< The process's registry.

  /// Registers a type-derived function; returns its id. Aborts the process with a message when
  /// two different names hash to one id or when called after freeze() (programming errors that
  /// would otherwise mis-dispatch calls).
  function_id add(std::string_view name, invoker_fn invoke, repeated_invoker_fn invoke_repeated,
                  std::uint32_t closure_size, std::uint32_t result_size);
  /// Registers an application-chosen id (user_function_bit is set on it). Throws seriema::error
  /// when the id is taken by another name or the registry is frozen.
  function_id add_user(function_id id, std::string_view name, invoker_fn invoke,
                       repeated_invoker_fn invoke_repeated, std::uint32_t closure_size,
                       std::uint32_t result_size);

  /// Builds the lookup table; later registrations are refused. Idempotent.
  void freeze();
  [[nodiscard]] bool frozen() const noexcept { return frozen_; }  ///< freeze() was called

  /// The entry for `id`, or nullptr (unknown id: a peer sent something we never registered).
  [[nodiscard]] const function_entry* find(function_id id) const noexcept;
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }  ///< entries
  /// Order-independent digest of every (id, name): equal in processes running the same binary.
  [[nodiscard]] std::uint64_t fingerprint() const noexcept;
  /// How this process's type-derived ids were made.
  [[nodiscard]] function_id_mode id_mode() const noexcept { return mode_; }

 private:
  function_registry();
  function_id_mode mode_ = function_id_mode::hash;
  std::vector<function_entry> entries_;
  std::vector<std::uint32_t> table_;  ///< open addressing: index+1 into entries_, 0 = empty
  bool frozen_ = false;
};

/// 32-bit id from a name (FNV-1a folded), with user_function_bit cleared.
function_id function_id_of_name(std::string_view name) noexcept;
/// The address-based id of `invoke`: its offset in the binary (executable or library) that holds
/// it. Aborts with a message when the offset does not fit 31 bits or the address is in no
/// loaded binary.
function_id function_id_of_address(invoker_fn invoke) noexcept;
/// A digest of the running executable: its GNU build id when it has one, else a hash of the file.
/// Equal in processes that run the same binary.
std::uint64_t executable_identity();

namespace detail {

template <class F>
F closure_from_bytes(const std::byte* bytes) noexcept {
  std::array<std::byte, sizeof(F)> raw;
  std::memcpy(raw.data(), bytes, sizeof(F));
  return std::bit_cast<F>(raw);
}

template <class F>
constexpr bool takes_context_v = std::is_invocable_v<F&, thread_context&>;

/// What f() or f(ctx) returns (the shapes call_return accepts).
template <class F>
using return_type_t = typename std::conditional_t<takes_context_v<F>,
                                                  std::invoke_result<F&, thread_context&>,
                                                  std::invoke_result<F&>>::type;

}  // namespace detail

/// The rule for anything that travels as a closure.
template <class F>
constexpr void check_remote_closure() {
  static_assert(std::is_trivially_copyable_v<F> && std::is_trivially_destructible_v<F>,
                "a remotely called function may capture only trivially copyable values (numbers, "
                "pointers, ids, RemoteMemoryLocators...): capture no std::string, std::vector or "
                "reference-owning object; pass such data as a buffer or a serialized argument");
}

/// Shapes of remote functions (they differ in how the invoker calls the closure).
struct plain_shape {};   // f() or f(thread_context&)
struct buffer_shape {};  // f(std::span<std::byte>) or f(thread_context&, std::span<std::byte>)
struct return_shape {};  // r = f() or f(thread_context&); r written into invocation::result
/// f(invocation&): the closure reads the buffer and writes the result itself (layers above wrap
/// user functions this way, e.g. to deserialize arguments); F::result_bytes says how many bytes
/// of result it writes (0: not a call_return).
struct invocation_shape {};

/// One instantiation per (closure type, shape) used remotely; its `id` is registered before main.
template <class F, class Shape>
struct function_wrapper {
  /// The invoker_fn registered for F: runs one call.
  static void invoke(const std::byte* closure, invocation& call) { run(closure, call); }

  /// The repeated_invoker_fn registered for F: runs closures next..count - 1.
  static void invoke_repeated(const std::byte* closures, std::uint32_t count,
                              const invocation& call, std::uint32_t& next) {
    constexpr std::uint64_t stride = closure_stride(sizeof(F));
    while (next < count) {
      const std::byte* closure = closures + next * stride;
      ++next;  // before the function runs: see repeated_invoker_fn
      invocation each = call;
      run(closure, each);
    }
  }

  /// Copies the closure out of the (possibly unaligned) bytes and calls it in Shape's way.
  [[gnu::always_inline]] static void run(const std::byte* closure, invocation& call) {
    F f = detail::closure_from_bytes<F>(closure);
    if constexpr (std::is_same_v<Shape, plain_shape>) {
      if constexpr (detail::takes_context_v<F>) {
        f(*call.self);
      } else {
        f();
      }
    } else if constexpr (std::is_same_v<Shape, invocation_shape>) {
      f(call);
    } else if constexpr (std::is_same_v<Shape, buffer_shape>) {
      if constexpr (std::is_invocable_v<F&, thread_context&, std::span<std::byte>>) {
        f(*call.self, call.buffer);
      } else {
        f(call.buffer);
      }
    } else {
      auto value = [&] {
        if constexpr (detail::takes_context_v<F>) {
          return f(*call.self);
        } else {
          return f();
        }
      }();
      static_assert(std::is_trivially_copyable_v<decltype(value)>,
                    "call_return: the return value must be trivially copyable");
      std::memcpy(call.result.data(), &value, sizeof value);
    }
  }

  /// Bytes of the value a call_return of F writes (0 unless Shape returns one).
  static constexpr std::uint32_t result_size() {
    if constexpr (std::is_same_v<Shape, return_shape>) {
      return sizeof(detail::return_type_t<F>);
    } else if constexpr (std::is_same_v<Shape, invocation_shape>) {
      return F::result_bytes;
    } else {
      return 0;
    }
  }

  /// F's id, registered before main.
  static inline const function_id id = function_registry::instance().add(
      typeid(function_wrapper).name(), &function_wrapper::invoke,
      &function_wrapper::invoke_repeated, static_cast<std::uint32_t>(sizeof(F)), result_size());
};

/// Registers `F` (a trivially copyable callable type) under an application-chosen id, e.g. so
/// that separately built programs can call each other. Returns the id with user_function_bit.
template <class F, class Shape = plain_shape>
function_id register_function(function_id id, std::string_view name) {
  check_remote_closure<F>();
  return function_registry::instance().add_user(
      id, name, &function_wrapper<F, Shape>::invoke, &function_wrapper<F, Shape>::invoke_repeated,
      static_cast<std::uint32_t>(sizeof(F)), function_wrapper<F, Shape>::result_size());
}

}  // namespace seriema::fabric
