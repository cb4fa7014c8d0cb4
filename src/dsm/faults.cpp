// Fault-driven access to a space (space_options::fault_driven): each block's pages are protected
// by its state, and a SIGSEGV inside a space's private copy runs the protocol on the faulting
// thread (fetch an invalid block, twin a clean one at its first store) and returns, so the load
// or store is retried; any other fault goes to the handler installed before (UCX's, a
// sanitizer's, or the default action), untouched. docs/shared-memory.md "Fault-driven access".
#include <fmt/format.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <seriema/base/error.hpp>

#include "coherence.hpp"
#include "faults.hpp"

namespace seriema::dsm::detail {

namespace {

/// The fault-driven spaces of the process: a fixed table the handler reads without a lock. A
/// space's creation sets its entry before it protects the pages, and its destruction clears it
/// before it unmaps them; both hold `table_mutex`.
constexpr std::size_t most_fault_spaces = 64;
std::array<std::atomic<space_state*>, most_fault_spaces> fault_spaces{};
std::mutex table_mutex;
struct sigaction previous_action{};
bool handler_installed = false;  // under table_mutex

/// The worker context of the calling thread (set by the dsm layer on the worker's own thread).
thread_local fabric::thread_context* worker_context = nullptr;

space_state* space_at(const void* address) noexcept {
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  for (const auto& entry : fault_spaces) {
    space_state* s = entry.load(std::memory_order_acquire);
    if (s == nullptr) continue;
    const auto first = reinterpret_cast<std::uintptr_t>(s->base);
    if (at >= first && at - first < s->layout.bytes) return s;
  }
  return nullptr;
}

/// Hands a fault that is not ours to the handler that was there before.
void pass_on(int signal, siginfo_t* info, void* context) {
  if ((previous_action.sa_flags & SA_SIGINFO) != 0 && previous_action.sa_sigaction != nullptr) {
    previous_action.sa_sigaction(signal, info, context);
    return;
  }
  if (previous_action.sa_handler == SIG_IGN || previous_action.sa_handler == SIG_DFL) {
    // Returning re-executes the access, which now takes the default action (a SIGSEGV the
    // program ignores would loop for ever on the same instruction: it dies instead).
    struct sigaction fallback{};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(signal, &fallback, nullptr);
    return;
  }
  previous_action.sa_handler(signal);
}

[[noreturn]] void die(const void* address, const char* why) noexcept {
  // fmt allocates: acceptable, the process is going down and the fault was synchronous.
  std::fprintf(stderr, "seriema dsm: a fault-driven access to %p failed: %s\n", address, why);
  std::fflush(stderr);
  std::abort();
}

/// Runs the protocol for a fault at `address` in space `s`: the block fetched when invalid,
/// else twinned when clean (a store to a readable block); a block already writable (another
/// thread of the process got there first) needs nothing.
void serve_fault(space_state& s, fabric::thread_context& self, const void* address) {
  entry_guard guard(&s);
  const auto offset =
      static_cast<std::uint64_t>(static_cast<const std::byte*>(address) - s.base);
  const std::uint64_t b = offset / s.layout.block_bytes;
  const fabric::deadline_clock::time_point deadline = self.deadline_in_force(fabric::no_deadline);
  std::lock_guard lock(s.mutex);
  ++s.counters.faults;
  const block_state& st = s.blocks[b];
  if (!st.valid) {
    prepare_blocks(s, self, b, b, false, deadline);  // a store faults again and twins
  } else if (!st.dirty) {
    prepare_blocks(s, self, b, b, true, deadline);
  }
}

void on_fault(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  space_state* s = space_at(info->si_addr);
  if (s == nullptr) {
    pass_on(signal, info, context);
    errno = saved_errno;
    return;
  }
  if (worker_context == nullptr) {
    die(info->si_addr, "the thread is not a worker of runtime::run (fault-driven spaces serve "
                       "the workers inside run())");
  }
  try {
    serve_fault(*s, *worker_context, info->si_addr);
  } catch (const std::exception& e) {
    die(info->si_addr, e.what());
  } catch (...) {
    die(info->si_addr, "an unknown exception");
  }
  errno = saved_errno;
}

void set_protection(space_state& s, std::uint64_t b, int protection) {
  if (mprotect(s.base + b * s.layout.block_bytes, s.layout.block_bytes, protection) != 0) {
    throw error(fmt::format("dsm: mprotect of block {} failed: {}", b, std::strerror(errno)));
  }
}

}  // namespace

void protect_block(space_state& s, std::uint64_t b) {
  if (!s.fault_driven) return;
  const block_state& st = s.blocks[b];
  set_protection(s, b, !st.valid ? PROT_NONE : st.dirty ? PROT_READ | PROT_WRITE : PROT_READ);
}

void seal_block(space_state& s, std::uint64_t b) {
  if (s.fault_driven) set_protection(s, b, PROT_READ);
}

void set_worker_context(fabric::thread_context* self) noexcept { worker_context = self; }

namespace {

/// Backs the private copy by a memory file mapped twice: the application's view at s.base
/// (replacing the anonymous reservation; read-only, as every block is valid and clean) and the
/// protocol's view, always writable.
void map_views(space_state& s) {
  const int fd = memfd_create("seriema-dsm-space", MFD_CLOEXEC);
  if (fd < 0) throw error(fmt::format("dsm: memfd_create failed: {}", std::strerror(errno)));
  struct closer {
    int fd;
    ~closer() { close(fd); }  // the mappings keep the file
  } closing{fd};
  if (ftruncate(fd, static_cast<off_t>(s.layout.bytes)) != 0) {
    throw error(fmt::format("dsm: sizing the space's memory file to {} bytes failed: {}",
                            s.layout.bytes, std::strerror(errno)));
  }
  void* view = mmap(nullptr, s.layout.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                    fd, 0);
  if (view == MAP_FAILED) {
    throw error(fmt::format("dsm: mapping the protocol's view of a fault-driven space failed: {}",
                            std::strerror(errno)));
  }
  void* app = mmap(s.base, s.layout.bytes, PROT_READ, MAP_SHARED | MAP_FIXED | MAP_NORESERVE, fd,
                   0);
  if (app != s.base) {
    munmap(view, s.layout.bytes);
    throw error(fmt::format("dsm: mapping a fault-driven space at {} failed: {}",
                            static_cast<void*>(s.base), std::strerror(errno)));
  }
  s.protocol_view = static_cast<std::byte*>(view);
}

}  // namespace

void register_fault_space(space_state& s) {
  map_views(s);
  std::lock_guard lock(table_mutex);
  if (!handler_installed) {
    struct sigaction action{};
    action.sa_sigaction = &on_fault;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGSEGV, &action, &previous_action) != 0) {
      throw error(fmt::format("dsm: installing the SIGSEGV handler of fault-driven spaces failed: "
                              "{}",
                              std::strerror(errno)));
    }
    handler_installed = true;
  }
  for (auto& entry : fault_spaces) {
    space_state* expected = nullptr;
    if (entry.compare_exchange_strong(expected, &s, std::memory_order_acq_rel)) return;
  }
  throw config_error(fmt::format("dsm: more than {} fault-driven spaces in one process",
                                 most_fault_spaces));
}

void unregister_fault_space(space_state& s) noexcept {
  std::lock_guard lock(table_mutex);
  for (auto& entry : fault_spaces) {
    space_state* expected = &s;
    if (entry.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel)) return;
  }
}

}  // namespace seriema::dsm::detail
