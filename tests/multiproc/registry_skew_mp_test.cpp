// Version skew: rank 1 registers one more remote function than rank 0 (as a different build
// would). The runtime must refuse to start on every rank; registry_skew_test.sh checks that the
// job fails with a message saying the registries differ and that no rank printed "started".
#include <fmt/format.h>

#include <cstdlib>
#include <seriema/fabric/runtime.hpp>
#include <string>

int main() try {
  const char* rank = std::getenv("SERIEMA_RUN_RANK");
  if (rank != nullptr && std::string(rank) == "1") {
    auto extra = [](seriema::fabric::thread_context&) {};
    seriema::fabric::register_function<decltype(extra)>(42, "only_in_the_newer_build");
  }
  seriema::fabric::runtime rt;
  fmt::print("rank {} started\n", rt.rank());
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "registry_skew_mp_test: {}\n", e.what());
  return 1;
}
