// The base layer: the settings registry (layers register their tables; unknown SERIEMA_*
// variables are refused naming the layers), the typed parsers, log lines and enum names.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <seriema/base/enum_names.hpp>
#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/base/settings.hpp>
#include <string>

namespace {

using namespace seriema;

constexpr config::setting alpha_table[] = {
    {"SERIEMA_TEST_ALPHA", "7", "a test setting of layer alpha"},
    {"SERIEMA_TEST_SIZE", "64K", "a size"},
};
constexpr config::setting beta_table[] = {
    {"SERIEMA_TEST_BETA", "yes", "a test setting of layer beta"},
};
// Registered in the opposite of their order: listing follows `order`, not registration.
const config::settings_registration beta{"beta", 20, beta_table};
const config::settings_registration alpha{"alpha", 10, alpha_table};

TEST(Settings, LayersListInOrderAndOnce) {
  config::register_settings("alpha", 10, beta_table);  // a second table for alpha is ignored
  auto layers = config::registered_layers();
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[0], "alpha");
  EXPECT_EQ(layers[1], "beta");
  auto all = config::all_settings();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].name, "SERIEMA_TEST_ALPHA");
  EXPECT_EQ(all[2].name, "SERIEMA_TEST_BETA");
}

TEST(Settings, TypedLookupsUseDefaultsAndEnvironment) {
  ::unsetenv("SERIEMA_TEST_ALPHA");
  EXPECT_EQ(config::get_unsigned("SERIEMA_TEST_ALPHA", 0, 100), 7u);
  ::setenv("SERIEMA_TEST_ALPHA", "42", 1);
  EXPECT_EQ(config::get_unsigned("SERIEMA_TEST_ALPHA", 0, 100), 42u);
  ::setenv("SERIEMA_TEST_ALPHA", "420", 1);
  EXPECT_THROW((void)config::get_unsigned("SERIEMA_TEST_ALPHA", 0, 100), config_error);
  ::unsetenv("SERIEMA_TEST_ALPHA");
  EXPECT_EQ(config::get_bytes("SERIEMA_TEST_SIZE"), 64u << 10);
  EXPECT_TRUE(config::get_bool("SERIEMA_TEST_BETA"));
  EXPECT_THROW((void)config::raw("SERIEMA_NOT_REGISTERED"), config_error);
}

TEST(Settings, UnknownVariableIsRefusedNamingTheLayers) {
  ::setenv("SERIEMA_TEST_TYPO", "1", 1);
  try {
    config::reject_unknown_environment_settings();
    FAIL() << "SERIEMA_TEST_TYPO was accepted";
  } catch (const config_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("SERIEMA_TEST_TYPO: unknown setting"), std::string::npos) << what;
    EXPECT_NE(what.find("alpha, beta"), std::string::npos) << what;
  }
  ::unsetenv("SERIEMA_TEST_TYPO");
  EXPECT_NO_THROW(config::reject_unknown_environment_settings());
}

TEST(Settings, ParsersNameTheSettingInErrors) {
  EXPECT_EQ(config::parse_duration("X", "500ms").count(), 500);
  EXPECT_EQ(config::parse_duration("X", "2m").count(), 120000);
  try {
    (void)config::parse_bytes("SERIEMA_TEST_SIZE", "12Q");
    FAIL();
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("SERIEMA_TEST_SIZE=12Q: unknown unit 'q'"),
              std::string::npos)
        << e.what();
  }
}

// Captures what log::write puts on stderr.
std::string logged(void (*emit)()) {
  std::fflush(stderr);
  char path[] = "/tmp/seriema-log-XXXXXX";
  const int file = ::mkstemp(path);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(file, STDERR_FILENO);
  emit();
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string text(4096, '\0');
  text.resize(static_cast<std::size_t>(::pread(file, text.data(), text.size(), 0)));
  ::close(file);
  ::unlink(path);
  return text;
}

TEST(Log, PrefixNamesRankAndThreadWhenKnown) {
  EXPECT_EQ(logged([] { log::warning("no rank yet: {}", 1); }),
            "seriema warning: no rank yet: 1\n");
  log::set_rank(3);
  EXPECT_EQ(logged([] { log::error("{} and {}", "a", 2); }), "seriema[3] error: a and 2\n");
  log::set_thread(12);
  EXPECT_EQ(logged([] { log::info("hello"); }), "seriema[3.12] info: hello\n");
  log::set_thread(-1);
  log::set_rank(-1);
}

enum class colour { red = 1, green = 5 };
const char* to_string(colour c) noexcept {
  static constexpr enum_name_entry<colour> names[] = {{colour::red, "red"},
                                                      {colour::green, "green"}};
  return name_in(names, c);
}

TEST(EnumNames, ToStringAndFmtUseTheTable) {
  EXPECT_STREQ(to_string(colour::green), "green");
  EXPECT_STREQ(to_string(static_cast<colour>(2)), "unknown");
  EXPECT_EQ(fmt::format("{} {}", colour::red, log::level::warning), "red warning");
}

}  // namespace
