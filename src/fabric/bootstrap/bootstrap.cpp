// bootstrap::create (mode detection, timeout resolution) and the single-process bootstrap.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <seriema/base/log.hpp>
#include <seriema/base/settings.hpp>
#include <seriema/fabric/bootstrap.hpp>
#include <seriema/fabric/detail/settings.hpp>

namespace seriema::fabric {

// Defined in bootstrap_launcher.cpp and bootstrap_pmix.cpp; `timeout` is already resolved.
std::unique_ptr<bootstrap> make_launcher_bootstrap(std::chrono::milliseconds timeout);
std::unique_ptr<bootstrap> make_pmix_bootstrap(std::chrono::milliseconds timeout);

namespace {

bool has_env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

// One process, no launcher: every collective involves only this process.
class single_bootstrap final : public bootstrap {
 public:
  bootstrap_mode mode() const noexcept override { return bootstrap_mode::single; }
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  int machine() const noexcept override { return 0; }
  int machine_count() const noexcept override { return 1; }
  int machine_of(int) const noexcept override { return 0; }

  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
    return {std::vector<std::byte>(mine.begin(), mine.end())};
  }
  void barrier() override {}
  void abort(const std::string& why) noexcept override {
    log::error("rank 0 is aborting: {}", why);
  }
};

std::chrono::milliseconds resolve_timeout(const bootstrap_options& options) {
  if (options.timeout.count() > 0) return options.timeout;
  auto timeout = config::get_duration("SERIEMA_BOOTSTRAP_TIMEOUT");
  if (timeout.count() <= 0) {
    throw config_error(fmt::format(
        "SERIEMA_BOOTSTRAP_TIMEOUT={}: a bootstrap collective needs a positive timeout; use e.g. "
        "30s",
        config::raw("SERIEMA_BOOTSTRAP_TIMEOUT").value_or("")));
  }
  return timeout;
}

}  // namespace

bootstrap_mode bootstrap::detect_mode() noexcept {
  if (has_env("PMIX_RANK") && has_env("PMIX_NAMESPACE")) return bootstrap_mode::pmix;
  if (has_env("SERIEMA_RUN_SOCKET")) return bootstrap_mode::launcher;
  return bootstrap_mode::single;
}

std::unique_ptr<bootstrap> bootstrap::create(const bootstrap_options& options) {
  auto timeout = resolve_timeout(options);  // validated in every mode, so typos show up early
  switch (detect_mode()) {
    case bootstrap_mode::pmix:
      return make_pmix_bootstrap(timeout);
    case bootstrap_mode::launcher:
      return make_launcher_bootstrap(timeout);
    case bootstrap_mode::single:
      break;
  }
  return std::make_unique<single_bootstrap>();
}

}  // namespace seriema::fabric
