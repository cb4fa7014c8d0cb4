// Calls with arguments that are not trivially copyable (strings, vectors, your own types):
// serialized with cereal on the caller, deserialized on the destination.
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./serialized_arguments
#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <numeric>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <string>
#include <vector>

using seriema::fabric::thread_context;
namespace invoke = seriema::invoke;
using invoke::call_status;
using invoke::channel;

namespace {
// Any type with a cereal serialize() (or save/load) member can be an argument.
struct order {
  std::string customer;
  std::map<std::string, int> items;
  template <class Archive>
  void serialize(Archive& archive) {
    archive(customer, items);
  }
};
std::atomic<std::uint64_t> failures{0};
}  // namespace

int main() try {
  seriema::fabric::runtime rt;
  rt.run([](thread_context& me) {
    const auto next = (me.id() + 1) % me.thread_count();
    const order o{"thread " + std::to_string(me.id()), {{"apples", 3}, {"pears", 2}}};
    if (invoke::call<channel::write>(me, next, [](thread_context& self, order& got) {
          fmt::print("thread {} got an order of {} kinds from {}\n", self.id(), got.items.size(),
                     got.customer);
        }, o) != call_status::ok) {
      ++failures;
    }
    // call_return with arguments: the destination sums the vector, the value comes back.
    const std::vector<std::uint64_t> numbers{1, 2, 3, 4, 5};
    seriema::fabric::return_slot<std::uint64_t> total;
    if (invoke::call_return<channel::send>(me, next, [](const std::vector<std::uint64_t>& v) {
          return std::accumulate(v.begin(), v.end(), std::uint64_t{0});
        }, total, numbers) != call_status::ok) {
      ++failures;
    }
    me.wait_for(total);
    if (!total.ready() || total.value() != 15) ++failures;
  });
  const std::uint64_t failed = rt.allreduce_sum(failures.load());
  if (rt.rank() == 0) fmt::print("serialized_arguments: {}\n", failed == 0 ? "ok" : "FAILED");
  return failed == 0 ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "serialized_arguments: {}\n", e.what());
  return 1;
}
