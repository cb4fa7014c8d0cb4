// Emulated machines: per-machine boot id files, the capability probe, and the child-side
// mount-namespace entry. See machine_isolation.hpp.
#include "machine_isolation.hpp"

#include <fmt/format.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <seriema/base/error.hpp>

namespace seriema::tools {

namespace {

constexpr const char* boot_id_path = "/proc/sys/kernel/random/boot_id";

std::string fresh_uuid() {
  std::ifstream uuid("/proc/sys/kernel/random/uuid");  // a new random UUID on every read
  std::string text;
  std::getline(uuid, text);
  if (text.size() != 36) throw seriema::error("cannot read /proc/sys/kernel/random/uuid");
  return text;
}

// Private mount namespace + bind mount of `file` over the boot id. Returns 0 or an errno value.
int switch_boot_id(const char* file) noexcept {
  if (::unshare(CLONE_NEWNS) != 0) return errno;
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
  if (::mount(file, boot_id_path, nullptr, MS_BIND, nullptr) != 0) return errno;
  return 0;
}

}  // namespace

emulated_machines::emulated_machines(int machines) : machines_(machines) {
  if (machines_ <= 1) return;
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                        "/seriema-machines.XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) {
    reason_ = fmt::format("cannot create {}: {}", pattern, std::strerror(errno));
    return;
  }
  directory_ = buffer.data();
  boot_id_files_.assign(static_cast<std::size_t>(machines_), "");
  try {
    for (int m = 1; m < machines_; ++m) {
      std::string file = fmt::format("{}/boot_id.{}", directory_, m);
      boot_id_files_[static_cast<std::size_t>(m)] = file;  // removed by the destructor
      std::ofstream out(file);
      out << fresh_uuid() << '\n';
      out.close();
      if (!out) throw seriema::error(fmt::format("cannot write {}", file));
    }
  } catch (const std::exception& e) {
    reason_ = e.what();  // isolation stays off, and the launcher says why
    return;
  }
  // Probe in a throwaway child so the launcher's own namespace stays untouched.
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(switch_boot_id(boot_id_files_[1].c_str()));
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
    reason_ = "the isolation probe did not run";
    return;
  }
  int err = WEXITSTATUS(status);
  isolated_ = err == 0;
  if (!isolated_) {
    reason_ = fmt::format("cannot bind-mount a boot id in a private mount namespace ({}; needs "
                          "root / CAP_SYS_ADMIN)",
                          std::strerror(err));
  }
}

emulated_machines::~emulated_machines() {
  for (const auto& file : boot_id_files_) {
    if (!file.empty()) ::unlink(file.c_str());
  }
  if (!directory_.empty()) ::rmdir(directory_.c_str());
}

bool emulated_machines::enter(int machine) const noexcept {
  if (!isolated_ || machine <= 0 || machine >= machines_) return true;
  int err = switch_boot_id(boot_id_files_[static_cast<std::size_t>(machine)].c_str());
  if (err != 0) {
    errno = err;
    return false;
  }
  return true;
}

}  // namespace seriema::tools
