// The base layer: the settings registry (layers register their tables and checks; unknown
// SERIEMA_* variables are refused naming the layers and the nearest name, settings of layers the
// program does not link are noted once; every problem of the configuration in one message), the
// typed parsers, log lines and enum names.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <seriema/base/enum_names.hpp>
#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/base/settings.hpp>
#include <string>
#include <utility>

namespace {

using namespace seriema;

constexpr config::setting alpha_table[] = {
    {"SERIEMA_TEST_ALPHA", "7", "a test setting of layer alpha"},
    {"SERIEMA_TEST_SIZE", "64K", "a size"},
};
constexpr config::setting beta_table[] = {
    {"SERIEMA_TEST_BETA", "yes", "a test setting of layer beta"},
};
constexpr config::setting gamma_table[] = {
    {"SERIEMA_TEST_GAMMA", "3", "a count of layer gamma, 1..9"},
    {"SERIEMA_TEST_DELTA", "1s", "a duration of layer gamma"},
};
// Layer gamma's check, as a layer's validate_settings reads its settings: each read on its own,
// so that every bad one is reported; through check_environment() again, as a layer's
// from_environment() does (the nested call returns at once).
void validate_gamma(config::problems& found) {
  config::check_environment();
  found.check([] { (void)config::get_unsigned("SERIEMA_TEST_GAMMA", 1, 9); });
  found.check([] { (void)config::get_duration("SERIEMA_TEST_DELTA"); });
}
// Registered in the opposite of their order: listing follows `order`, not registration.
const config::settings_registration gamma{"gamma", 30, gamma_table, &validate_gamma};
const config::settings_registration beta{"beta", 20, beta_table};
const config::settings_registration alpha{"alpha", 10, alpha_table};

TEST(Settings, LayersListInOrderAndOnce) {
  config::register_settings("alpha", 10, beta_table);  // a second table for alpha is ignored
  auto layers = config::registered_layers();
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_EQ(layers[0], "alpha");
  EXPECT_EQ(layers[1], "beta");
  EXPECT_EQ(layers[2], "gamma");
  auto all = config::all_settings();
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0].name, "SERIEMA_TEST_ALPHA");
  EXPECT_EQ(all[2].name, "SERIEMA_TEST_BETA");
  ASSERT_EQ(config::registered_table("gamma").size(), 2u);
  EXPECT_EQ(config::registered_table("gamma")[1].name, "SERIEMA_TEST_DELTA");
  EXPECT_TRUE(config::registered_table("invoke").empty());  // not linked into this test
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

TEST(Settings, TypoSuggestsTheNearestKnownName) {
  // Registered here, and known from the list of every layer's names though not linked here.
  for (const auto& [typo, meant] : {std::pair{"SERIEMA_TEST_ALPHX", "SERIEMA_TEST_ALPHA"},
                                    std::pair{"SERIEMA_TREADS", "SERIEMA_THREADS"},
                                    std::pair{"SERIEMA_FLUSHSIZE", "SERIEMA_FLUSH_SIZE"}}) {
    ::setenv(typo, "2", 1);
    try {
      config::reject_unknown_environment_settings();
      ADD_FAILURE() << typo << " was accepted";
    } catch (const config_error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("did you mean ") + meant + "?"),
                std::string::npos)
          << e.what();
    }
    ::unsetenv(typo);
  }
}

// Captures what `emit` writes on stderr.
template <class Emit>
std::string captured_stderr(Emit emit);

TEST(Settings, SettingOfALayerNotLinkedIsNotedOnceAndAccepted) {
  // One environment for a job of several programs: the invoke layer's setting is not a typo.
  ::setenv("SERIEMA_FLUSH_SIZE", "8K", 1);
  const std::string said = captured_stderr([] {
    config::reject_unknown_environment_settings();
    config::reject_unknown_environment_settings();
    config::check_environment();
  });
  ::unsetenv("SERIEMA_FLUSH_SIZE");
  EXPECT_EQ(said,
            "seriema info: SERIEMA_FLUSH_SIZE=8K: a setting of the invoke layer, which this "
            "program does not link (it links alpha, beta, gamma): ignored here\n");
}

TEST(Settings, ProblemsListEachLineOnce) {
  config::problems found;
  EXPECT_TRUE(found.empty());
  EXPECT_NO_THROW(found.throw_if_any());
  found.add("SERIEMA_A=1: bad");
  found.add("SERIEMA_B=2: bad\nSERIEMA_A=1: bad\n");  // a message of two problems, one known
  found.check([] { throw config_error("SERIEMA_C=3: bad"); });
  found.check([] {});
  ASSERT_EQ(found.lines().size(), 3u);
  try {
    found.throw_if_any();
    FAIL() << "no error";
  } catch (const config_error& e) {
    EXPECT_STREQ(e.what(), "SERIEMA_A=1: bad\nSERIEMA_B=2: bad\nSERIEMA_C=3: bad");
  }
}

TEST(Settings, CheckEnvironmentReportsEveryProblemAtOnce) {
  EXPECT_NO_THROW(config::check_environment());
  ::setenv("SERIEMA_TEST_GAMMA", "12", 1);
  ::setenv("SERIEMA_TEST_DELTA", "5parsecs", 1);
  ::setenv("SERIEMA_TEST_ALPHX", "1", 1);
  try {
    config::check_environment();
    FAIL() << "a bad configuration was accepted";
  } catch (const config_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("SERIEMA_TEST_ALPHX: unknown setting"), std::string::npos) << what;
    EXPECT_NE(what.find("\nSERIEMA_TEST_GAMMA=12: out of range; expected 1..9"), std::string::npos)
        << what;
    EXPECT_NE(what.find("\nSERIEMA_TEST_DELTA=5parsecs: unknown unit 'parsecs'"),
              std::string::npos)
        << what;
    EXPECT_EQ(std::count(what.begin(), what.end(), '\n'), 2) << what;  // one line each
  }
  ::unsetenv("SERIEMA_TEST_GAMMA");
  ::unsetenv("SERIEMA_TEST_DELTA");
  ::unsetenv("SERIEMA_TEST_ALPHX");
  EXPECT_NO_THROW(config::check_environment());
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

template <class Emit>
std::string captured_stderr(Emit emit) {
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

// Captures what log::write puts on stderr.
std::string logged(void (*emit)()) { return captured_stderr(emit); }

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
