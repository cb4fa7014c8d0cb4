// Function registry: wrappers register at static init with name-derived ids, invokers call the
// closure with the right shape, user ids, collisions and late registration are refused.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <seriema/base/error.hpp>
#include <seriema/fabric/function_registry.hpp>
#include <string>
#include <unordered_map>

using namespace seriema::fabric;

namespace {

template <class F>
std::array<std::byte, sizeof(F)> bytes_of(const F& f) {
  std::array<std::byte, sizeof(F)> out;
  std::memcpy(out.data(), &f, sizeof(F));
  return out;
}

}  // namespace

TEST(FunctionRegistry, PlainBufferAndReturnShapesDispatch) {
  int hits = 0;
  int* counter = &hits;
  auto plain = [counter, add = 5] { *counter += add; };
  auto buffered = [counter](std::span<std::byte> buf) { *counter += static_cast<int>(buf.size()); };
  auto returning = [x = 21] { return x * 2; };
  function_id plain_id = function_wrapper<decltype(plain), plain_shape>::id;
  function_id buffer_id = function_wrapper<decltype(buffered), buffer_shape>::id;
  function_id return_id = function_wrapper<decltype(returning), return_shape>::id;
  EXPECT_NE(plain_id, buffer_id);
  EXPECT_EQ(plain_id & user_function_bit, 0u);

  auto& registry = function_registry::instance();
  const function_entry* entry = registry.find(plain_id);
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->closure_size, sizeof(plain));
  auto closure = bytes_of(plain);
  invocation call;
  entry->invoke(closure.data(), call);
  EXPECT_EQ(hits, 5);

  std::array<std::byte, 7> payload{};
  call.buffer = payload;
  auto closure2 = bytes_of(buffered);
  registry.find(buffer_id)->invoke(closure2.data(), call);
  EXPECT_EQ(hits, 12);

  const function_entry* ret = registry.find(return_id);
  ASSERT_NE(ret, nullptr);
  EXPECT_EQ(ret->result_size, sizeof(int));
  int result = 0;
  call.result = std::as_writable_bytes(std::span(&result, 1));
  auto closure3 = bytes_of(returning);
  ret->invoke(closure3.data(), call);
  EXPECT_EQ(result, 42);
}

TEST(FunctionRegistry, IdsComeFromNamesAndUnknownIdsAreNotFound) {
  EXPECT_EQ(function_id_of_name("abc"), function_id_of_name("abc"));
  EXPECT_NE(function_id_of_name("abc"), function_id_of_name("abd"));
  EXPECT_EQ(function_registry::instance().find(0x12345u | user_function_bit), nullptr);
}

TEST(FunctionRegistry, UserIdsAreRegisteredOnceAndConflictsRefused) {
  auto f = [] {};
  function_id id = register_function<decltype(f)>(77, "user_seventy_seven");
  EXPECT_EQ(id, 77u | user_function_bit);
  EXPECT_EQ(register_function<decltype(f)>(77, "user_seventy_seven"), id);  // idempotent
  EXPECT_THROW(register_function<decltype(f)>(77, "someone_else"), seriema::error);
  ASSERT_NE(function_registry::instance().find(id), nullptr);
  EXPECT_EQ(function_registry::instance().find(id)->name, "user_seventy_seven");
}

TEST(FunctionRegistryDeathTest, CollidingNamesAbortWithAMessage) {
  // Birthday search (about 2^16 names for 31-bit ids): find two names with one id.
  std::unordered_map<function_id, std::string> seen;
  std::string first, second;
  for (unsigned i = 0; second.empty(); ++i) {
    std::string name = "generated-function-" + std::to_string(i);
    auto [it, inserted] = seen.emplace(function_id_of_name(name), name);
    if (!inserted) {
      first = it->second;
      second = name;
    }
  }
  ASSERT_EQ(function_id_of_name(first), function_id_of_name(second));
  EXPECT_DEATH(
      {
        function_registry::instance().add(first, nullptr, nullptr, 1, 0);
        function_registry::instance().add(second, nullptr, nullptr, 1, 0);
      },
      "seriema error: function ids collide");
}

TEST(FunctionRegistryDeathTest, RegistrationAfterStartupAborts) {
  EXPECT_DEATH(
      {
        function_registry::instance().freeze();
        function_registry::instance().add("late-registration", nullptr, nullptr, 1, 0);
      },
      "registered after the runtime started");
}
