// Container operations from threads that are not workers (containers::post and ask): attached
// threads of every process update a counting_set and a map concurrently with the workers, then
// read them back with futures, checked against the sequential counts; an ask whose container is
// gone fails its future, one whose operation throws brings the exception back.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <seriema/containers/any_thread.hpp>
#include <seriema/containers/containers.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/mp_main.hpp"

using namespace seriema;
using fabric::thread_context;
using invoke::call_status;

namespace {

constexpr int attached_per_worker = 2;
constexpr std::uint64_t inserts_per_thread = 400;
constexpr std::uint64_t distinct_keys = 37;

using counts_type = containers::counting_set<std::uint64_t>;
using names_type = containers::map<std::uint64_t, std::string>;

// The key of the k-th insert of worker w's attached thread a (a = attached_per_worker: the
// worker's own inserts).
std::uint64_t key_of(std::uint64_t w, std::uint64_t a, std::uint64_t k) {
  return (w * 7 + a * 3 + k * k) % distinct_keys;
}

std::map<std::uint64_t, std::uint64_t> expected_counts(std::uint64_t workers) {
  std::map<std::uint64_t, std::uint64_t> counts;
  for (std::uint64_t w = 0; w < workers; ++w) {
    for (std::uint64_t a = 0; a <= attached_per_worker; ++a) {
      for (std::uint64_t k = 0; k < inserts_per_thread; ++k) ++counts[key_of(w, a, k)];
    }
  }
  return counts;
}

// Runs body(attached context, a) on attached_per_worker threads while `me` serves calls, and
// joins them.
template <class Body>
void on_attached_threads(thread_context& me, Body body) {
  std::atomic<int> finished{0};
  std::vector<std::thread> threads;
  for (int a = 0; a < attached_per_worker; ++a) {
    threads.emplace_back([&, a] {
      // More attached threads than SERIEMA_ATTACH_SLOTS (4) on 3 workers: wait for a slot.
      auto attached = test::rt().attach(fabric::deadline_clock::now() + std::chrono::seconds(60));
      body(attached.context(), static_cast<std::uint64_t>(a));
      ++finished;
    });
  }
  EXPECT_TRUE(me.wait_until([&] { return finished.load() == attached_per_worker; },
                            fabric::deadline_clock::now() + std::chrono::seconds(60)));
  for (auto& t : threads) t.join();
}

TEST(ContainersAnyThread, AttachedThreadsUpdateAndRead) {
  test::rt().run([&](thread_context& me) {
    counts_type counts(me);
    names_type names(me);
    const std::uint64_t w = me.id();
    // Phase 1: the attached threads post while the worker inserts too.
    std::atomic<int> not_ok{0};
    for (std::uint64_t k = 0; k < inserts_per_thread; ++k) {
      ASSERT_EQ(counts.insert(key_of(w, attached_per_worker, k)), call_status::ok);
    }
    on_attached_threads(me, [&](thread_context& from, std::uint64_t a) {
      for (std::uint64_t k = 0; k < inserts_per_thread; ++k) {
        if (containers::post(from, counts, [](counts_type& c, const std::uint64_t& key) {
              return c.insert(key);
            }, key_of(w, a, k)) != call_status::ok) {
          ++not_ok;
        }
      }
      const std::string name = "worker " + std::to_string(w) + " attached " + std::to_string(a);
      if (containers::post(from, names, [](names_type& m, const std::uint64_t& key,
                                           const std::string& value) {
            return m.insert_or_assign(key, value);
          }, w * 100 + a, name) != call_status::ok) {
        ++not_ok;
      }
    });
    EXPECT_EQ(not_ok.load(), 0);
    counts.barrier();  // the posts of every process's attached threads are applied
    // Phase 2: the attached threads read with futures (find, a plain value, failures).
    const auto expected = expected_counts(me.thread_count());
    std::atomic<int> wrong{0};
    on_attached_threads(me, [&](thread_context& from, std::uint64_t a) {
      for (const auto& [key, n] : expected) {
        auto found = containers::ask(from, counts, [](counts_type& c, const std::uint64_t& k) {
          return c.count(k);
        }, key);
        if (found.get() != n) ++wrong;
      }
      const std::uint64_t other = (w + 1) % me.thread_count();
      auto name = containers::ask(from, names, [](names_type& m, const std::uint64_t& key) {
        return m.find(key);
      }, other * 100 + a);
      const std::optional<std::string> got = name.get();
      if (got != "worker " + std::to_string(other) + " attached " + std::to_string(a)) ++wrong;
      auto local = containers::ask(from, names, [](names_type& m) {
        return std::uint64_t{m.local().size()};
      });
      if (local.get() > me.thread_count() * attached_per_worker) ++wrong;
      auto thrown = containers::ask(from, names, [](names_type&) -> int {
        throw std::runtime_error("asked to throw");
      });
      try {
        (void)thrown.get();
        ++wrong;
      } catch (const std::exception& e) {
        if (std::string(e.what()).find("asked to throw") == std::string::npos) ++wrong;
      }
    });
    EXPECT_EQ(wrong.load(), 0) << "worker " << w;
    counts.barrier();
  });
}

// The object is destroyed on its worker after the attached thread asked and before the worker
// served the ask: the future fails naming it (the worker does not poll in between).
TEST(ContainersAnyThread, AContainerGoneFailsTheAsk) {
  test::rt().run([&](thread_context& me) {
    std::optional<names_type> names(std::in_place, me);
    std::atomic<bool> asked{false}, finished{false};
    std::atomic<int> wrong{0};
    std::thread other([&] {
      auto attached = test::rt().attach();
      auto answer = containers::ask(attached.context(), *names, [](names_type& m) {
        return std::uint64_t{m.local().size()};
      });
      asked = true;
      try {
        (void)answer.get();
        ++wrong;
      } catch (const std::exception& e) {  // seriema::error, rebuilt at the caller
        if (std::string(e.what()).find("is gone") == std::string::npos) ++wrong;
      }
      finished = true;
    });
    while (!asked.load()) std::this_thread::yield();  // not serving: the ask waits
    names.reset();
    EXPECT_TRUE(me.wait_until([&] { return finished.load(); },
                              fabric::deadline_clock::now() + std::chrono::seconds(60)));
    other.join();
    EXPECT_EQ(wrong.load(), 0);
    me.quiesce();
  });
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }
