// Registered memory UCX allocates (arena segments, the reply-cell region) is shared memory that
// only the job's own user can attach: SysV segments and POSIX shm files end up mode 0600.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <seriema/transfer/ucx.hpp>
#include <string>
#include <sys/stat.h>

using namespace seriema::transfer;

namespace {

struct segment_modes {
  int owned = 0;         // shared-memory objects of this process found
  int group_or_other = 0;  // of which some group/other permission bit is set
};

segment_modes modes_of_this_process() {
  segment_modes out;
  if (std::FILE* list = std::fopen("/proc/sysvipc/shm", "r")) {
    char line[512];
    (void)std::fgets(line, sizeof line, list);
    while (std::fgets(line, sizeof line, list) != nullptr) {
      long long key = 0, size = 0;
      int id = 0, creator = 0;
      unsigned perms = 0;
      if (std::sscanf(line, "%lld %d %o %lld %d", &key, &id, &perms, &size, &creator) != 5) continue;
      if (creator != getpid()) continue;
      ++out.owned;
      if ((perms & 077) != 0) ++out.group_or_other;
    }
    std::fclose(list);
  }
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(fd.path(), ec).string();
    if (ec || target.rfind("/dev/shm/ucx_", 0) != 0) continue;
    struct stat st {};
    if (::stat(fd.path().c_str(), &st) != 0) continue;
    ++out.owned;
    if ((st.st_mode & 077) != 0) ++out.group_or_other;
  }
  return out;
}

}  // namespace

TEST(SharedMemoryPermissions, UcxAllocatedMemoryIsOwnerOnly) {
  ucx_context context{context_options{}};
  ucp_mem_h memh = nullptr;
  std::byte* base = nullptr;
  ASSERT_EQ(map_ucx_allocated_memory(context, std::size_t{64} << 20, &memh, &base), UCS_OK);
  base[0] = std::byte{1};  // mapped and writable here
  const segment_modes modes = modes_of_this_process();
  ucp_mem_unmap(context.handle(), memh);
  EXPECT_GT(modes.owned, 0) << "no shared-memory segment of this process found to check";
  EXPECT_EQ(modes.group_or_other, 0) << "segments other users of the group can attach";
}
