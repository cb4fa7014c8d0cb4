// The text of placement: trimming and parsing numbers, counted nouns, lists, labels of machines
// and the zones a setting may name (helpers of placement.cpp and placement_text.cpp).
#pragma once

#include <optional>
#include <seriema/fabric/placement.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace seriema::fabric::detail {

std::string_view trim(std::string_view text);
// "1 zone", "3 zones".
std::string counted(long long n, std::string_view one, std::string_view many);
std::string join(const std::vector<int>& values, std::string_view separator = ",");
// Parses a positive decimal int with nothing around it; nullopt otherwise (sign, junk, overflow).
std::optional<int> parse_positive(std::string_view text);
// "2 zones, 8 cores, 16 PUs".
std::string topology_counts(const machine_topology& topology);
// "machine 3", "machines 0-3", "machines 0,2,5".
std::string machines_label(const std::vector<int>& machines);
// What a zone setting may name on this machine, for error messages.
std::string zone_choices(const machine_topology& topology);

}  // namespace seriema::fabric::detail
