// The base layer's list of every layer's setting names (what makes a setting of a layer a
// program does not link "known, not a typo") must equal the tables the layers register: compared
// here with what seriema-info, which links every layer, lists.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <seriema/base/settings.hpp>
#include <string>
#include <vector>

namespace {

using namespace seriema;

// seriema-info --settings --json, with the variables the launcher sets (listed only when set).
nlohmann::json settings_listed_by_seriema_info() {
  const std::string command =
      "env SERIEMA_RUN_SOCKET=/nonexistent SERIEMA_RUN_RANK=0 SERIEMA_RUN_SIZE=1 "
      "SERIEMA_RUN_MACHINE=0 SERIEMA_RUN_MACHINES=1 SERIEMA_RUN_ISOLATED=no " SERIEMA_INFO_PROGRAM
      " --settings --json";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return nullptr;
  std::string text;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) text.append(buffer, n);
  const int status = ::pclose(pipe);
  if (status != 0) return nullptr;
  return nlohmann::json::parse(text, nullptr, false);
}

TEST(SettingNames, EveryLayersListEqualsTheTableItRegisters) {
  const nlohmann::json listed = settings_listed_by_seriema_info();
  ASSERT_TRUE(listed.is_object() && listed.contains("settings"))
      << SERIEMA_INFO_PROGRAM " --settings --json failed or printed no settings";
  std::map<std::string, std::vector<std::string>> registered;  // layer -> names, table order
  for (const auto& s : listed["settings"]) {
    registered[s["layer"].get<std::string>()].push_back(s["name"].get<std::string>());
  }
  std::map<std::string, std::vector<std::string>> known;
  for (const auto& layer : config::every_layer_setting_names()) {
    known[std::string(layer.layer)].assign(layer.names.begin(), layer.names.end());
  }
  for (const auto& [layer, names] : registered) {
    EXPECT_TRUE(known.contains(layer))
        << "layer " << layer << " registers settings that src/base/setting_names.cpp lacks";
  }
  for (const auto& [layer, names] : known) {
    EXPECT_EQ(names, registered[layer])
        << "src/base/setting_names.cpp (left) and the " << layer
        << " layer's table, src/" << layer << "/settings.cpp (right), name different settings";
  }
}

}  // namespace
