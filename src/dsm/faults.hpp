// The fault-driven spaces' registry and SIGSEGV handler (faults.cpp), as space.cpp and the dsm
// layer use them.
#pragma once

#include "space_state.hpp"

namespace seriema::dsm::detail {

/// Adds fault-driven space `s` (its private copy mapped) to the handler's table, installing the
/// handler on first use (the one before it keeps every fault outside a space), and protects
/// every block as valid and clean. Throws seriema::error when sigaction or mprotect fails,
/// config_error beyond 64 fault-driven spaces in a process.
void register_fault_space(space_state& s);
/// Removes `s` from the table (before its private copy is unmapped).
void unregister_fault_space(space_state& s) noexcept;
/// The calling worker thread's context, for the faults it takes (null: not a worker).
void set_worker_context(fabric::thread_context* self) noexcept;

}  // namespace seriema::dsm::detail
