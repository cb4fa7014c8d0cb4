// What the floating-home protocol (coherence.cpp) offers the synchronization objects
// (handover.cpp): the guard against nested use, the errors, releases and the acquire of one
// write notice. Every function here runs with the space's state mutex held.
#pragma once

#include <cstdint>
#include <string>

#include "space_state.hpp"

namespace seriema::dsm::detail {

/// Marks the calling thread as inside space `s` for its lifetime; throws seriema::error when it
/// already is (a call served while this thread waited inside the space used the space again).
class entry_guard {
 public:
  explicit entry_guard(const void* s);
  ~entry_guard();
  entry_guard(const entry_guard&) = delete;
  entry_guard& operator=(const entry_guard&) = delete;

 private:
  const void* saved_;
};

/// Throws block_lost for block b, whose master or lock was with `rank` (`how` says what
/// happened to it).
[[noreturn]] void throw_lost(std::uint64_t b, int rank, const char* how);
/// Throws deadline_error: `what` was still awaited at the deadline.
[[noreturn]] void throw_deadline(const std::string& what);

/// Releases every dirty block. A block that fails is dropped from the dirty list with its twin
/// before the exception leaves; those after it stay dirty.
void release_all(space_state& s, fabric::thread_context& self,
                 deadline_clock::time_point deadline);

/// Makes blocks first..last current (fetching the invalid ones) and, `for_write`, twinned.
void prepare_blocks(space_state& s, fabric::thread_context& self, std::uint64_t first,
                    std::uint64_t last, bool for_write, deadline_clock::time_point deadline);

/// In a fault-driven space, sets block b's page protection from its state: none while invalid,
/// read-only while clean (the first store faults and twins it), read-write while dirty. Nothing
/// in an explicit space.
void protect_block(space_state& s, std::uint64_t b);
/// In a fault-driven space, makes block b read-only for the application (before a release
/// merges it).
void seal_block(space_state& s, std::uint64_t b);

/// The acquire of one write notice: block b's version `version` was released by `releaser`. An
/// older copy here is dropped (a dirty one is released first: the merge brings the newer master
/// in and keeps this process's writes).
void apply_notice(space_state& s, fabric::thread_context& self, std::uint64_t b,
                  std::uint32_t version, int releaser, deadline_clock::time_point deadline);

/// The acquire of a hand-over record's floor (floating home with leases): every release of a
/// version at or below `floor` must be read here from now on. Passes the floor on in this
/// process's records; copies whose lease ends below it are renewed or fetched on their next use
/// (dirty ones released now: the merge takes the current master).
void apply_floor(space_state& s, fabric::thread_context& self, std::uint32_t floor,
                 deadline_clock::time_point deadline);

}  // namespace seriema::dsm::detail
