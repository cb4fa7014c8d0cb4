// Emulated machines for seriema-run --machines: each emulated machine gets its own kernel boot
// id (bind-mounted in a private mount namespace), which is how UCX decides whether two processes
// share a host (shm, cma). With distinct boot ids UCX connects them over the network, exactly as
// between real machines. Needs CAP_SYS_ADMIN (root); otherwise the launcher says so once.
#pragma once

#include <string>
#include <vector>

namespace seriema::tools {

class emulated_machines {
 public:
  // Parent, before forking: writes one boot id file per machine > 0 and probes (in a throwaway
  // child) whether this process may create a mount namespace and bind-mount over the boot id.
  explicit emulated_machines(int machines);
  ~emulated_machines();  // removes the files
  emulated_machines(const emulated_machines&) = delete;
  emulated_machines& operator=(const emulated_machines&) = delete;

  [[nodiscard]] bool isolated() const noexcept { return isolated_; }
  // Why isolation is off ("" when on or not needed).
  [[nodiscard]] const std::string& reason() const noexcept { return reason_; }

  // Child, between fork and exec: enters machine `machine`'s identity. Uses only system calls.
  // Returns false (errno set) when isolation was expected and failed.
  bool enter(int machine) const noexcept;

 private:
  int machines_;
  bool isolated_ = false;
  std::string reason_;
  std::string directory_;
  std::vector<std::string> boot_id_files_;  // index = machine; "" for machine 0 (the real id)
};

}  // namespace seriema::tools
