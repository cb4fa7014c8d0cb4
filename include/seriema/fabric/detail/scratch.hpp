// Byte buffers a thread borrows for one operation (serialized arguments, a serialized reply): one
// per nesting level, so that a buffer stays its holder's while something it waits for runs calls
// that borrow buffers too. No allocation once a level's buffer has grown.
#pragma once

#include <cstddef>
#include <vector>

namespace seriema::fabric::detail {

// A lease on this thread's buffer of the current nesting level; the next lease taken while it
// lives gets the next level's. Leases end in the reverse order they were taken (scopes).
// Thread-safety: the thread that took it.
class scratch_lease {
 public:
  scratch_lease();
  ~scratch_lease();
  scratch_lease(const scratch_lease&) = delete;
  scratch_lease& operator=(const scratch_lease&) = delete;
  // The leased buffer (its contents are the holder's; cleared by nobody else).
  [[nodiscard]] std::vector<std::byte>& bytes() noexcept { return *bytes_; }

 private:
  std::vector<std::byte>* bytes_;
};

}  // namespace seriema::fabric::detail
