// Futures across threads of one or several processes, on every channel: values of every kind
// (fixed-size, serialized, large through registered memory, void), arguments, the callee's
// exceptions rebuilt at the caller, each failure outcome as its typed error, then / when_all /
// when_any, calls from attached threads, and undeserializable results.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <numeric>
#include <seriema/invoke/invoke.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/invoke_checks.hpp"
#include "support/mp_main.hpp"
#include "support/skewed_value.hpp"

using namespace seriema;
using test::skewed;
using fabric::outcome;
using fabric::thread_context;
using invoke::call_status;
using invoke::channel;
using test::threads;

namespace {

// A value of fixed size larger than a reply cell (table path).
struct wide {
  std::array<std::uint64_t, 16> words;
};

// A user type with a serialize() member.
struct account {
  std::string owner;
  std::map<std::string, std::int64_t> balances;
  template <class Archive>
  void serialize(Archive& archive) {
    archive(owner, balances);
  }
};

// An exception type the test registers (so it comes back as itself), and one it does not.
struct account_missing : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct unregistered_problem : std::exception {
  const char* what() const noexcept override { return "something odd"; }
};
struct derived_range : std::out_of_range {
  using std::out_of_range::out_of_range;
};
const bool registered = [] {
  invoke::register_remote_exception<account_missing>();
  return true;
}();

fabric::thread_id next_of(const thread_context& me) { return (me.id() + 1) % me.thread_count(); }

// Every thread asks the next (round robin over the job) for values of each kind on channel C.
template <channel C>
void values_of_every_kind() {
  std::atomic<int> checked{0};
  test::rt().run([&](thread_context& me) {
    const fabric::thread_id dest = next_of(me);
    // A fixed-size value in a reply cell.
    auto small = invoke::call_return<C, invoke::policy::retry>(
        me, dest, [](thread_context& self) { return self.id() * 3 + 1; });
    EXPECT_EQ(small.get(), dest * 3 + 1);
    // A fixed-size value larger than a cell.
    auto big = invoke::call_return<C, invoke::policy::retry>(me, dest, [](thread_context& self) {
      wide w{};
      for (std::size_t i = 0; i < w.words.size(); ++i) w.words[i] = self.id() + i;
      return w;
    });
    const wide got = big.get();
    EXPECT_EQ(got.words[15], dest + 15);
    // Serialized values, with arguments.
    auto text = invoke::call_return<C, invoke::policy::retry>(
        me, dest,
        [](thread_context& self, const std::string& prefix, int times) {
          std::string out;
          for (int i = 0; i < times; ++i) out += prefix + std::to_string(self.id());
          return out;
        },
        std::string("thread "), 3);
    EXPECT_EQ(text.get(), "thread " + std::to_string(dest) + "thread " + std::to_string(dest) +
                              "thread " + std::to_string(dest));
    auto names = invoke::call_return<C, invoke::policy::retry>(me, dest, [](thread_context& self) {
      return std::vector<std::string>{"a", std::to_string(self.id()), std::string(300, 'z')};
    });
    const std::vector<std::string> got_names = names.get();
    ASSERT_EQ(got_names.size(), 3u);
    EXPECT_EQ(got_names[1], std::to_string(dest));
    auto user = invoke::call_return<C, invoke::policy::retry>(
        me, dest,
        [](thread_context& self, const std::string& owner) {
          return account{owner, {{"thread", self.id()}, {"twice", 2 * self.id()}}};
        },
        std::string("caller ") + std::to_string(me.id()));
    const account a = user.get();
    EXPECT_EQ(a.owner, "caller " + std::to_string(me.id()));
    EXPECT_EQ(a.balances.at("twice"), 2 * dest);
    // Nothing returned: a future<void>.
    auto done = invoke::call_return<C, invoke::policy::retry>(me, dest, [] {});
    done.get();
    // Large values go through registered memory: over the 64 KiB inline limit, and over
    // SERIEMA_SEND_LIMIT (1 MiB), which no message may exceed.
    for (std::size_t size : {std::size_t{200} << 10, std::size_t{3} << 20}) {
      auto large = invoke::call_return<C, invoke::policy::retry>(
          me, dest, [](thread_context& self, std::uint64_t n) {
            std::vector<std::uint32_t> v(n);
            std::iota(v.begin(), v.end(), self.id());
            return v;
          }, std::uint64_t{size / 4});
      const std::vector<std::uint32_t> values = large.get();
      ASSERT_EQ(values.size(), size / 4);
      EXPECT_EQ(values.back(), dest + size / 4 - 1);
    }
    checked += 1;
  });
  EXPECT_EQ(checked.load(), test::rt().options().threads_per_process);
}

TEST(Futures, ValuesOfEveryKindWrite) { values_of_every_kind<channel::write>(); }
TEST(Futures, ValuesOfEveryKindTrad) { values_of_every_kind<channel::trad>(); }
TEST(Futures, ValuesOfEveryKindOvfl) { values_of_every_kind<channel::ovfl>(); }
TEST(Futures, ValuesOfEveryKindSend) { values_of_every_kind<channel::send>(); }

// A serialized reply keeps its bytes while its send waits: every thread asks thread 0 at once,
// on messengers made in this run, so thread 0's first reply to each caller waits for its
// reverse messenger's chunks and runs the other callers' calls meanwhile (whose replies are
// serialized too). Each caller must get exactly its own answers. Several runs, fresh messengers
// each.
TEST(Futures, SerializedRepliesKeepTheirBytesWhileTheirSendWaits) {
  for (int round = 0; round < 3; ++round) {
    test::rt().run([&](thread_context& me) {
      std::vector<invoke::future<std::string>> answers;
      for (int i = 0; i < 8; ++i) {
        answers.push_back(invoke::call_return<channel::write, invoke::policy::retry>(
            me, 0,
            [](thread_context&, std::uint32_t from, int index) {
              return "for " + std::to_string(from) + "#" + std::to_string(index) +
                     std::string(static_cast<std::size_t>(from * 8 + index), '.');
            },
            me.id(), i));
      }
      for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(answers[i].get(), "for " + std::to_string(me.id()) + "#" + std::to_string(i) +
                                        std::string(me.id() * 8 + i, '.'));
      }
    });
  }
}

// The callee's exceptions come back to the caller: registered types as themselves (the
// standard ones and the test's) with their origin, a type derived from a registered one as that
// base, others as remote_error naming the type; the destination does not see them.
template <channel C>
void exceptions_come_back() {
  test::rt().run([&](thread_context& me) {
    const fabric::thread_id dest = next_of(me);
    auto range = invoke::call_return<C, invoke::policy::retry>(me, dest, [](thread_context&) {
      return std::vector<int>{}.at(3);
    });
    try {
      (void)range.get();
      ADD_FAILURE() << "no exception";
    } catch (const std::out_of_range& e) {
      EXPECT_NE(std::string(e.what()).find("vector"), std::string::npos) << e.what();
      const invoke::remote_origin* origin = invoke::origin_of(e);
      ASSERT_NE(origin, nullptr) << "a rebuilt exception knows where it was thrown";
      EXPECT_EQ(origin->origin_thread(), dest);
      EXPECT_EQ(origin->type_name(), "std::out_of_range");
    }
    auto mine = invoke::call_return<C, invoke::policy::retry>(me, dest, []() -> int {
      throw account_missing("no account 42");
    });
    EXPECT_THROW((void)mine.get(), account_missing);
    auto derived = invoke::call_return<C, invoke::policy::retry>(me, dest, []() -> int {
      throw derived_range("index 9");
    });
    try {
      (void)derived.get();
      ADD_FAILURE() << "no exception";
    } catch (const std::out_of_range& e) {
      EXPECT_STREQ(e.what(), "index 9");
      const invoke::remote_origin* origin = invoke::origin_of(e);
      ASSERT_NE(origin, nullptr);
      EXPECT_NE(origin->type_name().find("derived_range"), std::string::npos);
    }
    auto odd = invoke::call_return<C, invoke::policy::retry>(me, dest, [](thread_context&) {
      throw unregistered_problem();
      return std::string();
    });
    auto result = odd.try_get();
    ASSERT_FALSE(result.has_value());
    EXPECT_EQ(result.result(), outcome::threw);
    try {
      (void)std::move(result).value();
      ADD_FAILURE() << "no exception";
    } catch (const invoke::remote_error& e) {
      EXPECT_NE(e.type_name().find("unregistered_problem"), std::string::npos);
      EXPECT_EQ(e.remote_what(), "something odd");
      EXPECT_NE(std::string(e.what()).find("something odd"), std::string::npos);
    }
    auto not_std = invoke::call_return<C, invoke::policy::retry>(me, dest, []() -> int {
      throw 42;
    });
    try {
      (void)not_std.get();
      ADD_FAILURE() << "no exception";
    } catch (const invoke::remote_error& e) {
      EXPECT_NE(e.type_name().find("not a std::exception"), std::string::npos) << e.type_name();
    }
    // The destination's own polls saw none of them.
    EXPECT_EQ(me.deferred_exceptions(), 0u);
  });
}

TEST(Futures, ExceptionsComeBackWrite) { exceptions_come_back<channel::write>(); }
TEST(Futures, ExceptionsComeBackTrad) { exceptions_come_back<channel::trad>(); }
TEST(Futures, ExceptionsComeBackSend) { exceptions_come_back<channel::send>(); }

// Each way a future fails without a value is its own error type.
TEST(Futures, EachFailureOutcomeIsItsOwnError) {
  test::rt().run([&](thread_context& me) {
    // Never sent: no such thread.
    auto nowhere = invoke::call_return<channel::send>(me, 0x7fff0000u, [] {
      return 1;
    });
    EXPECT_EQ(nowhere.status(), call_status::bad_destination);
    EXPECT_THROW((void)nowhere.get(), invoke::not_executed_error);
    // A function the destination does not know (sent, refused there): not executed.
    auto& table = invoke::detail::futures_of(me);
    fabric::thread_context::opened_reply opened;
    auto unknown = invoke::detail::open_reply_future<int>(table, next_of(me), opened);
    const std::uint64_t closure = 0;
    invoke::detail::note_sent(
        unknown, me.call_with_reply_raw_for_testing(next_of(me), 0x7654320u,
                                                    std::as_bytes(std::span(&closure, 1)),
                                                    opened.index, opened.generation));
    auto unknown_result = unknown.try_get();
    EXPECT_EQ(unknown_result.result(), outcome::not_executed);
    EXPECT_EQ(unknown_result.status(), call_status::ok);
    // The timed cases: thread 0 calls thread 1, which makes no calls of its own meanwhile (a
    // caller that ran a slow call in its own wait would see its reply in time).
    if (me.id() != 0) return;
    const fabric::thread_id dest = 1;
    // Cancelled before the reply came (the callee takes its time).
    auto slow = invoke::call_return<channel::write, invoke::policy::retry>(me, dest, [] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return 7;
    });
    slow.cancel();
    EXPECT_EQ(slow.result(), outcome::cancelled);
    EXPECT_THROW((void)slow.get(), invoke::cancelled_error);
    // A deadline shorter than the callee's work.
    auto late = invoke::call_return<channel::send>(me, dest, [] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      return 8;
    });
    EXPECT_EQ(late.wait(std::chrono::milliseconds(20)), outcome::deadline_exceeded);
    EXPECT_THROW((void)late.get(), invoke::deadline_exceeded_error);
    // The same deadline through with_deadline and try_get.
    auto later = invoke::with_deadline(
        invoke::call_return<channel::write, invoke::policy::retry>(me, dest, [] {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          return 9;
        }),
        std::chrono::milliseconds(20));
    auto r = later.try_get();
    EXPECT_EQ(r.result(), outcome::deadline_exceeded);
    EXPECT_THROW((void)std::move(r).value(), invoke::deadline_exceeded_error);
  });
}

// Bytes that do not deserialize into the caller's type end the future not_executed and are
// counted; the thread goes on.
TEST(Futures, UndeserializableResultsEndNotExecuted) {
  const std::uint64_t before = test::rt().counters().rejected_results.load();
  test::rt().run([&](thread_context& me) {
    auto f = invoke::call_return<channel::send>(me, next_of(me), [] { return skewed{41}; });
    EXPECT_EQ(f.wait(), outcome::not_executed);
    EXPECT_THROW((void)f.get(), invoke::not_executed_error);
    auto after = invoke::call_return<channel::write, invoke::policy::retry>(
        me, next_of(me), [] { return std::string("fine"); });
    EXPECT_EQ(after.get(), "fine");
  });
  // Each process counts the rejections of its own callers.
  EXPECT_EQ(test::rt().counters().rejected_results.load() - before,
            static_cast<std::uint64_t>(test::rt().options().threads_per_process));
}

// then runs on the owner thread inside its poll; when_all over 64 calls; when_any.
TEST(Futures, ContinuationsAndCombinators) {
  test::rt().run([&](thread_context& me) {
    const std::thread::id owner = std::this_thread::get_id();
    const fabric::thread_id dest = next_of(me);
    auto doubled = invoke::call_return<channel::write, invoke::policy::retry>(
                       me, dest, [](thread_context& self) { return int(self.id()); })
                       .then([owner](int v) {
                         EXPECT_EQ(std::this_thread::get_id(), owner);
                         return std::to_string(2 * v);
                       });
    EXPECT_EQ(doubled.get(), std::to_string(2 * dest));
    // A failure skips a value callback and reaches the end of the chain.
    auto skipped = invoke::call_return<channel::send>(me, dest, []() -> int {
                     throw std::invalid_argument("bad");
                   }).then([](int v) { return v + 1; });
    EXPECT_THROW((void)skipped.get(), std::invalid_argument);
    // A callback taking call_result sees every outcome.
    auto seen = invoke::call_return<channel::send>(me, dest, []() -> int {
                  throw std::invalid_argument("bad");
                }).then([](invoke::call_result<int> r) { return r.result() == outcome::threw; });
    EXPECT_TRUE(seen.get());
    // 64 calls in flight, over every thread of the job.
    std::vector<invoke::future<std::uint64_t>> many;
    for (std::uint64_t i = 0; i < 64; ++i) {
      many.push_back(invoke::call_return<channel::write, invoke::policy::retry>(
          me, static_cast<fabric::thread_id>(i % me.thread_count()),
          [i](thread_context& self) { return i * 1000 + self.id(); }));
    }
    std::vector<std::uint64_t> values = invoke::when_all(me, std::move(many)).get();
    ASSERT_EQ(values.size(), 64u);
    for (std::uint64_t i = 0; i < 64; ++i) EXPECT_EQ(values[i], i * 1000 + i % me.thread_count());
    // A failure ends it as the first failed future in order (call 3), after every call ended;
    // the later failure (call 5) counts as looked at, so nothing is reported unobserved.
    const std::uint64_t unobserved = test::rt().counters().failed_futures_unobserved.load();
    std::vector<invoke::future<int>> some;
    for (int i = 0; i < 8; ++i) {
      some.push_back(invoke::call_return<channel::write, invoke::policy::retry>(
          me, dest, [i]() -> int {
            if (i == 3) throw std::out_of_range("third");
            if (i == 5) throw std::invalid_argument("fifth");
            return i;
          }));
    }
    EXPECT_THROW((void)invoke::when_all(me, std::move(some)).get(), std::out_of_range);
    EXPECT_EQ(test::rt().counters().failed_futures_unobserved.load(), unobserved);
    // Variadic when_all of different types.
    auto [number, text] =
        invoke::when_all(invoke::call_return<channel::send>(me, dest, [] { return 5; }),
                         invoke::call_return<channel::send>(me, dest, [] {
                           return std::string("five");
                         }))
            .get();
    EXPECT_EQ(number, 5);
    EXPECT_EQ(text, "five");
  });
}

// when_any: the quick one wins; the slow one comes back pending and is still waited for.
// Thread 0 races a slow call to thread 1 (which calls nothing itself) against one to itself.
TEST(Futures, WhenAnyGivesTheFirstAndHandsBackTheRest) {
  test::rt().run([&](thread_context& me) {
    if (me.id() != 0) return;
    std::vector<invoke::future<int>> race;
    race.push_back(invoke::call_return<channel::send>(me, 1, [] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return 1;
    }));
    race.push_back(invoke::call_return<channel::send>(me, me.id(), [] { return 2; }));
    auto first = invoke::when_any(std::move(race)).get();
    EXPECT_EQ(first.index, 1u);
    ASSERT_EQ(first.futures.size(), 2u);
    EXPECT_EQ(first.futures[1].get(), 2);
    EXPECT_EQ(first.futures[0].get(), 1);
  });
}

// Aggregators give futures too (trad: the batch is published when the caller waits).
TEST(Futures, AggregatorsGiveFutures) {
  test::rt().run([&](thread_context& me) {
    const fabric::thread_id dest = next_of(me);
    invoke::aggregator<channel::trad> batch(me);
    auto a = batch.call_return<invoke::policy::retry>(dest, [](int x) { return x + 1; }, 41);
    auto to = batch.to(dest);
    auto b = to.call_return<invoke::policy::retry>([](thread_context& self) {
      return std::to_string(self.id());
    });
    EXPECT_EQ(a.get(), 42);
    EXPECT_EQ(b.get(), std::to_string(dest));
  });
}

// A failed future nobody looked at is counted (and the first in a process logged); one whose
// failure was asked for, or that was cancelled, is not.
TEST(Futures, FailedFuturesNobodyLookedAtAreCounted) {
  const std::uint64_t before = test::rt().counters().failed_futures_unobserved.load();
  test::rt().run([&](thread_context& me) {
    const fabric::thread_id dest = next_of(me);
    {
      auto dropped = invoke::call_return<channel::send>(me, dest, []() -> int {
        throw std::runtime_error("nobody will know");
      });
      // Wait for it to end without asking how (ready() does not count as looking).
      EXPECT_TRUE(me.wait_until([&] { return dropped.ready(); }));
    }
    {
      auto seen = invoke::call_return<channel::send>(me, dest, []() -> int {
        throw std::runtime_error("looked at");
      });
      EXPECT_EQ(seen.wait(), outcome::threw);
    }
    {
      auto cancelled = invoke::call_return<channel::send>(me, dest, [] { return 1; });
      cancelled.cancel();
    }
  });
  EXPECT_EQ(test::rt().counters().failed_futures_unobserved.load() - before,
            static_cast<std::uint64_t>(test::rt().options().threads_per_process));
}

// A large value's pieces are lent to the caller and given back once it read them; the callee's
// process frees only memory it lent, and only once.
TEST(Futures, LargeValuePiecesAreGivenBackOnce) {
  auto& rt = test::rt();
  const std::uint64_t before = rt.counters().rejected_returns.load();
  rt.run([&](thread_context& me) {
    auto large = invoke::call_return<channel::send>(
        me, next_of(me), [](std::uint64_t n) { return std::vector<std::uint8_t>(n, 7); },
        std::uint64_t{300} << 10);
    EXPECT_EQ(large.get().size(), std::size_t{300} << 10);
  });
  EXPECT_EQ(rt.counters().rejected_returns.load(), before);
  const transfer::registered_buffer memory =
      rt.service_allocate(rt.placement().zone_of_process(rt.rank()), 4096);
  ASSERT_TRUE(memory);
  const auto address = reinterpret_cast<std::uint64_t>(memory.data);
  EXPECT_FALSE(rt.service_return(address, memory.size)) << "never lent";
  rt.service_lend(address, memory.size);
  EXPECT_FALSE(rt.service_return(address, memory.size + 1)) << "another size";
  EXPECT_TRUE(rt.service_return(address, memory.size));
  EXPECT_FALSE(rt.service_return(address, memory.size)) << "given back twice";
  EXPECT_FALSE(rt.service_free(address, memory.size)) << "the return freed it";
}

// A thread that is not a worker calls through an attach slot (send-based).
TEST(Futures, AttachedThreadsGetFutures) {
  auto& rt = test::rt();
  std::atomic<int> ok{0};
  rt.run([&](thread_context& me) {
    if (rt.placement().locate(me.id()).local_thread != 0) return;
    std::atomic<bool> finished{false};
    std::thread pool_thread([&rt, &ok, &finished, dest = next_of(me)] {
      auto attached = rt.attach();
      thread_context& ctx = attached.context();
      auto f = invoke::call_return<channel::send>(ctx, dest, [](thread_context& self) {
        return std::string("from ") + std::to_string(self.id());
      });
      if (f.get() == "from " + std::to_string(dest)) ++ok;
      auto thrown = invoke::call_return<channel::send>(ctx, dest, []() -> int {
        throw std::length_error("too long");
      });
      try {
        (void)thrown.get();
      } catch (const std::length_error&) {
        ++ok;
      }
      finished = true;
    });
    // Serve calls meanwhile: the attached thread's callee may be this very thread.
    me.wait_until([&] { return finished.load(); });
    pool_thread.join();
  });
  EXPECT_EQ(ok.load(), 2);
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }
