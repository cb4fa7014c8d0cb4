// Invoke-layer features beyond plain calls, in every channel, between threads of one or several
// processes: arguments serialized with cereal (and corrupt argument bytes rejected), synchronizer
// notices on transmit and on consumption on every primitive (broadcasts included), the put and
// get variants of call_buffer and broadcast_buffer, and the asynchronous put-then-call.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <seriema/invoke/invoke.hpp>
#include <seriema/transfer/ucx.hpp>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include "support/invoke_checks.hpp"
#include "support/mp_main.hpp"

using namespace seriema;
using fabric::thread_context;
using invoke::call_status;
using invoke::channel;
using invoke::notify_on;
using test::checksum;
using test::fill_pattern;
using test::inbox;
using test::inbox_of;
using test::inboxes;
using test::reset_inboxes;
using test::threads;

namespace {

// A user type with a cereal serialize() member.
struct label {
  std::string name;
  std::map<std::uint32_t, std::string> tags;
  template <class Archive>
  void serialize(Archive& archive) {
    archive(name, tags);
  }
};

std::string text_for(std::uint32_t from, std::uint32_t to) {
  return "a call from thread " + std::to_string(from) + " to thread " + std::to_string(to) +
         std::string(from * 37 % 300, 'x');  // sizes differ per pair
}
std::vector<std::uint64_t> values_for(std::uint32_t from, std::uint32_t to) {
  std::vector<std::uint64_t> v(from * 5 + to + 1);
  std::iota(v.begin(), v.end(), std::uint64_t{from} * 1000);
  return v;
}

// call(dest, f, args...) and call_return(dest, f, slot, args...) from every thread to every
// thread: the destination sees exactly the values the caller serialized.
template <channel C>
void serialized_arguments() {
  reset_inboxes();
  auto& rt = test::rt();
  std::array<std::atomic<std::uint64_t>, test::max_local_threads> returns_ok{};
  rt.run([&](thread_context& ctx) {
    const std::uint32_t me = ctx.id();
    const auto local = test::rt().placement().locate(me).local_thread;
    invoke::synchronizer consumed(ctx, ctx.thread_count());
    for (fabric::thread_id dest = 0; dest < ctx.thread_count(); ++dest) {
      const std::string text = text_for(me, dest);
      const std::vector<std::uint64_t> values = values_for(me, dest);
      const label tag{"thread " + std::to_string(me), {{me, "caller"}, {dest + 100, "callee"}}};
      auto check = [me, dest](thread_context& self, std::string& t, std::vector<std::uint64_t>& v,
                              label& l) {
        inbox& box = inbox_of(self);
        if (self.id() != dest || t != text_for(me, dest) || v != values_for(me, dest) ||
            l.name != "thread " + std::to_string(me) || l.tags.size() != 2 ||
            l.tags[me] != "caller" || l.tags[dest + 100] != "callee") {
          ++box.wrong;
        }
        box.source_sum += me;
        ++box.calls;
      };
      ASSERT_EQ((invoke::call<C, invoke::policy::retry>(ctx, dest, check, text, values, tag)),
                call_status::ok);
      // With a consumption notice (and a by-value parameter).
      ASSERT_EQ((invoke::call<C, invoke::policy::retry, notify_on::consume>(
                    ctx, dest,
                    [dest](thread_context& self, std::string t) {
                      if (self.id() != dest || t.empty()) ++inbox_of(self).wrong;
                      inbox_of(self).bytes += t.size();
                    },
                    consumed, text)),
                call_status::ok);
      invoke::return_slot<std::uint64_t> slot;
      ASSERT_EQ((invoke::call_return<C, invoke::policy::retry>(
                    ctx, dest,
                    [](const std::string& t, const std::vector<std::uint64_t>& v) {
                      return t.size() + std::accumulate(v.begin(), v.end(), std::uint64_t{0});
                    },
                    slot, text, values)),
                call_status::ok);
      ctx.wait_for(slot);
      ASSERT_TRUE(slot.ready());
      const std::uint64_t expected =
          text.size() + std::accumulate(values.begin(), values.end(), std::uint64_t{0});
      EXPECT_EQ(slot.value(), expected);
      if (slot.value() == expected) returns_ok[local] += 1;
    }
    EXPECT_TRUE(consumed.wait());
  });
  std::uint64_t all_ids = 0;
  for (fabric::thread_id t = 0; t < threads(); ++t) all_ids += t;
  for (int t = 0; t < rt.options().threads_per_process; ++t) {
    const fabric::thread_id me = rt.placement().global_id(rt.rank(), t);
    std::uint64_t text_bytes = 0;
    for (fabric::thread_id from = 0; from < threads(); ++from) text_bytes += text_for(from, me).size();
    EXPECT_EQ(inboxes[t].calls, threads()) << "local thread " << t;
    EXPECT_EQ(inboxes[t].source_sum, all_ids);
    EXPECT_EQ(inboxes[t].bytes, text_bytes);
    EXPECT_EQ(inboxes[t].wrong, 0u);
    EXPECT_EQ(returns_ok[t].load(), threads());
  }
}

}  // namespace

TEST(InvokeFeatures, SerializedArgumentsSend) { serialized_arguments<channel::send>(); }
TEST(InvokeFeatures, SerializedArgumentsWrite) { serialized_arguments<channel::write>(); }
TEST(InvokeFeatures, SerializedArgumentsTrad) { serialized_arguments<channel::trad>(); }
TEST(InvokeFeatures, SerializedArgumentsOvfl) { serialized_arguments<channel::ovfl>(); }

namespace {

struct never_runs {
  void operator()(thread_context& self, std::string&) const { ++inbox_of(self).wrong; }
};

}  // namespace

// Argument bytes that are not a serialization of the function's parameters (as a corrupt or
// hostile peer could send) are rejected and counted; the function does not run, and the
// receiver keeps serving good calls.
TEST(InvokeFeatures, CorruptArgumentsAreRejectedAndCounted) {
  reset_inboxes();
  auto& rt = test::rt();
  const fabric::thread_id receiver = threads() - 1;
  const std::uint64_t before = rt.counters().rejected_arguments.load();
  constexpr channel modes[] = {channel::send, channel::write, channel::trad};
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != 0) return;
    using wrapper = invoke::detail::with_arguments<never_runs, std::string>;
    // A string claiming 100 bytes followed by only 8.
    std::vector<std::byte> truncated(16, std::byte{0});
    const std::uint64_t claimed = 100;
    std::memcpy(truncated.data(), &claimed, sizeof claimed);
    // A string claiming 2^57 + 3 bytes (found by tests/fuzz/arguments_fuzz): refused before
    // anything that size is allocated.
    std::vector<std::byte> huge(16, std::byte{0});
    const std::uint64_t absurd = (std::uint64_t{1} << 57) + 3;
    std::memcpy(huge.data(), &absurd, sizeof absurd);
    // A valid string followed by bytes no parameter takes.
    std::vector<std::byte> trailing;
    invoke::detail::serialize_arguments(trailing, std::string("ok"));
    trailing.resize(trailing.size() + 3, std::byte{7});
    for (channel mode : modes) {
      for (const auto& bad : {truncated, huge, trailing}) {
        ASSERT_EQ((invoke::detail::dispatch<invoke::policy::retry, fabric::invocation_shape>(
                      ctx, mode, receiver, wrapper{never_runs{}}, bad, nullptr,
                      notify_on::transmit)),
                  call_status::ok);
      }
      ASSERT_EQ((invoke::call<channel::write, invoke::policy::retry>(
                    ctx, receiver,
                    [](thread_context& self, const std::string& s) {
                      if (s != "good") ++inbox_of(self).wrong;
                      ++inbox_of(self).calls;
                    },
                    std::string("good"))),
                call_status::ok);
    }
  });
  if (const test::inbox* got = test::inbox_here(receiver)) {
    EXPECT_EQ(got->calls, std::size(modes));
    EXPECT_EQ(got->wrong, 0u);
    EXPECT_EQ(rt.counters().rejected_arguments.load() - before, 3 * std::size(modes));
  }
}

namespace {

// Synchronizer test gate: the destination runs `gate` first (same channel, so FIFO puts every
// later call behind it) and spins there without polling until another thread of its process
// opens it, so nothing behind the gate can be consumed meanwhile.
std::atomic<bool> gate_open{false};
std::atomic<bool> gate_entered{false};

// Sends the gate to `gated` on channel C and waits until it runs there.
template <channel C>
void close_gate(thread_context& ctx, fabric::thread_id gated) {
  const fabric::thread_id caller = ctx.id();
  ASSERT_EQ((invoke::call<C, invoke::policy::retry>(ctx, gated, [caller](thread_context& self) {
              ASSERT_EQ(self.call(caller, [] { gate_entered = true; }), call_status::ok);
              while (!gate_open.load(std::memory_order_acquire)) {
                std::this_thread::sleep_for(std::chrono::microseconds(100));
              }
            })),
            call_status::ok);
  if constexpr (C == channel::trad) invoke::channels_of(ctx).flush(ctx);
  ctx.wait_until([] { return gate_entered.load(); });
}

struct counted {
  std::uint64_t value;
  void operator()(thread_context& self) const {
    inbox_of(self).bytes += value;
    ++inbox_of(self).calls;
  }
};

template <channel C>
void synchronizer_notices() {
  reset_inboxes();
  auto& rt = test::rt();
  if (rt.options().threads_per_process < 2) GTEST_SKIP() << "needs 2 threads per process";
  gate_open = false;
  gate_entered = false;
  const fabric::thread_id caller = 0;
  const fabric::thread_id gated = threads() - 1;
  const fabric::thread_id opener = gated - 1;  // same process as `gated` (block placement)
  ASSERT_EQ(rt.placement().locate(opener).process, rt.placement().locate(gated).process);
  constexpr std::uint64_t k = 100;
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != caller) return;
    close_gate<C>(ctx, gated);
    invoke::synchronizer on_consume(ctx, k);
    invoke::synchronizer on_transmit(ctx, k);
    const std::vector<std::byte> buffer(64, std::byte{1});
    for (std::uint64_t i = 0; i < k; ++i) {
      if (i % 2 == 0) {
        ASSERT_EQ((invoke::call<C, invoke::policy::retry, notify_on::consume>(ctx, gated, counted{1},
                                                                             on_consume)),
                  call_status::ok);
      } else {
        ASSERT_EQ((invoke::call_buffer<C, invoke::policy::retry, notify_on::consume>(
                      ctx, gated,
                      [](thread_context& self, std::span<std::byte> b) {
                        inbox_of(self).bytes += b.size();
                        ++inbox_of(self).calls;
                      },
                      buffer, on_consume)),
                  call_status::ok);
      }
      ASSERT_EQ((invoke::call<C, invoke::policy::retry, notify_on::transmit>(ctx, gated,
                                                                            counted{1000},
                                                                            on_transmit)),
                call_status::ok);
    }
    if constexpr (C == channel::trad) invoke::channels_of(ctx).flush(ctx);
    // Transmitted: all counted down at once. Consumed: none yet, the destination is gated.
    EXPECT_EQ(on_transmit.remaining(), 0u);
    EXPECT_EQ(on_consume.remaining(), k);
    ASSERT_EQ(ctx.call(opener, [] { gate_open.store(true, std::memory_order_release); }),
              call_status::ok);
    EXPECT_TRUE(on_consume.wait());
    EXPECT_EQ(on_consume.remaining(), 0u);
  });
  if (const test::inbox* got = test::inbox_here(gated)) {
    EXPECT_EQ(got->calls, 2 * k);
    EXPECT_EQ(got->bytes, k / 2 + (k / 2) * 64 + 1000 * k);
  }
}

}  // namespace

TEST(InvokeFeatures, SynchronizerNoticesSend) { synchronizer_notices<channel::send>(); }
TEST(InvokeFeatures, SynchronizerNoticesWrite) { synchronizer_notices<channel::write>(); }
TEST(InvokeFeatures, SynchronizerNoticesTrad) { synchronizer_notices<channel::trad>(); }
TEST(InvokeFeatures, SynchronizerNoticesOvfl) { synchronizer_notices<channel::ovfl>(); }

namespace {

// The primitives that took no synchronizer before (call_return, call_buffer's put variant and
// its asynchronous form): on transmit all are counted down at once; on consume none is while the
// destination is gated, and all are once it opens. Values and bytes arrive intact.
template <channel C>
void synchronizers_on_every_primitive() {
  reset_inboxes();
  auto& rt = test::rt();
  if (rt.options().threads_per_process < 2) GTEST_SKIP() << "needs 2 threads per process";
  gate_open = false;
  gate_entered = false;
  const fabric::thread_id caller = 0;
  const fabric::thread_id gated = threads() - 1;
  const fabric::thread_id opener = gated - 1;
  static constexpr std::size_t size = 3000;
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != caller) return;
    close_gate<C>(ctx, gated);
    std::vector<std::byte> origin(size);
    fill_pattern(origin, 77);
    const std::uint64_t sum = checksum(origin);
    auto check = [sum](thread_context& self, std::span<std::byte> got) {
      if (got.size() != size || checksum(got) != sum) ++inbox_of(self).wrong;
      inbox_of(self).bytes += got.size();
      ++inbox_of(self).calls;
    };
    std::array<transfer::remote_memory_locator, 4> targets;
    for (auto& t : targets) t = ctx.allocate_remote(gated, size);
    invoke::synchronizer on_transmit(ctx, 2);
    invoke::synchronizer on_consume(ctx, 3);
    fabric::return_slot<std::uint64_t> sent_slot, consumed_slot;
    auto answer = [](thread_context& self) -> std::uint64_t { return self.id() * 10 + 1; };
    using retry = invoke::policy::retry;
    ASSERT_EQ((invoke::call_return<C, retry, notify_on::transmit>(ctx, gated, answer, sent_slot,
                                                                 on_transmit)),
              call_status::ok);
    ASSERT_EQ((invoke::call_return<C, retry, notify_on::consume>(ctx, gated, answer,
                                                                consumed_slot, on_consume)),
              call_status::ok);
    ASSERT_EQ((invoke::call_buffer<C, retry, notify_on::transmit>(ctx, gated, check, origin,
                                                                 targets[0], on_transmit)),
              call_status::ok);
    ASSERT_EQ((invoke::call_buffer<C, retry, notify_on::consume>(ctx, gated, check, origin,
                                                                targets[1], on_consume)),
              call_status::ok);
    // The asynchronous put-then-call: its call goes out from a later poll of this thread.
    invoke::synchronizer async_sent(ctx, 1);
    ASSERT_EQ((invoke::call_buffer_put_async<C, notify_on::transmit>(ctx, gated, check, origin,
                                                                    targets[2], async_sent)),
              call_status::ok);
    ASSERT_EQ((invoke::call_buffer_put_async<C, notify_on::consume>(ctx, gated, check, origin,
                                                                   targets[3], on_consume)),
              call_status::ok);
    EXPECT_EQ(async_sent.wait_for(std::chrono::seconds(60)), fabric::outcome::done);
    if constexpr (C == channel::trad) invoke::channels_of(ctx).flush(ctx);
    EXPECT_EQ(on_transmit.remaining(), 0u);
    // Give a wrongly early notice time to arrive.
    ctx.wait_until([] { return false; },
                   fabric::deadline_clock::now() + std::chrono::milliseconds(50));
    EXPECT_EQ(on_consume.remaining(), 3u) << "a consumption was reported behind a closed gate";
    EXPECT_FALSE(consumed_slot.done());
    ASSERT_EQ(ctx.call(opener, [] { gate_open.store(true, std::memory_order_release); }),
              call_status::ok);
    EXPECT_EQ(on_consume.wait_for(std::chrono::seconds(60)), fabric::outcome::done)
        << on_consume.remaining() << " consumptions not reported";
    EXPECT_EQ(ctx.wait_for(sent_slot, std::chrono::seconds(60)), fabric::outcome::done);
    EXPECT_EQ(ctx.wait_for(consumed_slot, std::chrono::seconds(60)), fabric::outcome::done);
    EXPECT_EQ(sent_slot.value(), gated * 10 + 1);
    EXPECT_EQ(consumed_slot.value(), gated * 10 + 1);
    EXPECT_EQ(invoke::channels_of(ctx).received().failed_puts, 0u);
    for (auto& t : targets) ctx.free_remote(t);
  });
  if (const test::inbox* got = test::inbox_here(gated)) {
    EXPECT_EQ(got->calls, 4u);
    EXPECT_EQ(got->bytes, 4 * size);
    EXPECT_EQ(got->wrong, 0u);
  }
}

// Every broadcast form with a synchronizer counted down on consumption, from thread 0: once it
// is done, every thread of the job has run each broadcast's function (asked afterwards).
template <channel C>
void broadcasts_with_synchronizers() {
  reset_inboxes();
  auto& rt = test::rt();
  static constexpr std::size_t size = 2500;
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != 0) return;
    const fabric::thread_id n = ctx.thread_count();
    std::vector<std::byte> bytes(size);
    fill_pattern(bytes, 5);
    const std::uint64_t sum = checksum(bytes);
    auto check = [sum](thread_context& self, std::span<std::byte> got) {
      if (got.size() != size || checksum(got) != sum) ++inbox_of(self).wrong;
      inbox_of(self).bytes += got.size();
      ++inbox_of(self).calls;
    };
    std::vector<transfer::remote_memory_locator> targets(n);
    for (fabric::thread_id t = 0; t < n; ++t) targets[t] = ctx.allocate_remote(t, size);
    transfer::remote_memory_locator origin = ctx.allocate_remote(0, size);
    std::memcpy(reinterpret_cast<void*>(origin.address), bytes.data(), size);

    invoke::synchronizer all_ran(ctx, 4);
    invoke::synchronizer sent(ctx, 1);
    invoke::broadcast<C, notify_on::consume>(
        ctx, [](thread_context& self) { ++inbox_of(self).calls; }, all_ran);
    invoke::broadcast_buffer<C, notify_on::consume>(ctx, check, bytes, all_ran);
    EXPECT_EQ((invoke::broadcast_buffer<C, notify_on::consume>(ctx, check, bytes, targets,
                                                              all_ran)),
              call_status::ok);
    invoke::broadcast_buffer_get<C, notify_on::consume>(ctx, check, origin, all_ran);
    invoke::broadcast<C, notify_on::transmit>(ctx, [] {}, sent);
    EXPECT_EQ(sent.remaining(), 0u);
    if constexpr (C == channel::trad) invoke::channels_of(ctx).flush(ctx);
    ASSERT_EQ(all_ran.wait_for(std::chrono::seconds(60)), fabric::outcome::done);
    // Done means every thread ran all four: ask each one what it saw.
    for (fabric::thread_id t = 0; t < n; ++t) {
      fabric::return_slot<std::uint64_t> calls, wrong;
      ASSERT_EQ(ctx.call_return(t, [](thread_context& self) { return inbox_of(self).calls; }, calls),
                call_status::ok);
      ASSERT_EQ(ctx.call_return(t, [](thread_context& self) { return inbox_of(self).wrong; }, wrong),
                call_status::ok);
      ASSERT_EQ(ctx.wait_for(calls, std::chrono::seconds(60)), fabric::outcome::done);
      ASSERT_EQ(ctx.wait_for(wrong, std::chrono::seconds(60)), fabric::outcome::done);
      EXPECT_EQ(calls.value(), 4u) << "thread " << t;
      EXPECT_EQ(wrong.value(), 0u) << "thread " << t;
    }
    // Refused before anything is sent: a table without a target per thread, a small target.
    EXPECT_EQ((invoke::broadcast_buffer<C>(ctx, check, bytes, std::span(targets).first(n - 1))),
              call_status::bad_destination);
    std::vector<std::byte> larger(size + 1);
    EXPECT_EQ((invoke::broadcast_buffer<C>(ctx, check, larger, targets)), call_status::too_large);
    for (auto& t : targets) ctx.free_remote(t);
    ctx.free_remote(origin);
  });
}

}  // namespace

namespace {

// Consumption notices to a sender on another machine take the path SERIEMA_REMOTE_NOTICES
// chooses (auto: atomic only with an RDMA transport), counted by the notifying receiver; where
// the sender's memory is mapped (same machine, shm) they are plain atomics (neither counter).
template <channel C>
void notices_take_the_configured_path() {
  auto& rt = test::rt();
  const char* setting = std::getenv("SERIEMA_REMOTE_NOTICES");
  const std::string mode = setting != nullptr ? setting : "auto";
  const bool atomic = mode == "atomic" || (mode == "auto" && rt.context().network_rdma());
  constexpr std::uint64_t k = 64;
  rt.run([&](thread_context& ctx) {
    const fabric::thread_id n = ctx.thread_count();
    const auto step = static_cast<fabric::thread_id>(rt.options().threads_per_process);
    const fabric::thread_id dest = (ctx.id() + step) % n;
    const fabric::thread_id source = (ctx.id() + n - step % n) % n;
    invoke::synchronizer consumed(ctx, k);
    for (std::uint64_t i = 0; i < k; ++i) {
      ASSERT_EQ((invoke::call<C, invoke::policy::retry, notify_on::consume>(ctx, dest, [] {},
                                                                           consumed)),
                call_status::ok);
    }
    if constexpr (C == channel::trad) invoke::channels_of(ctx).flush(ctx);
    ASSERT_EQ(consumed.wait_for(std::chrono::seconds(60)), fabric::outcome::done);
    // Our own k receptions from `source` (each notice is counted when its call ran).
    const invoke::receive_counters& got = invoke::channels_of(ctx).received();
    ASSERT_TRUE(ctx.wait_until([&] { return got.calls >= k; },
                               fabric::deadline_clock::now() + std::chrono::seconds(60)));
    const int source_process = rt.placement().locate(source).process;
    if (rt.same_machine(source_process) && rt.context().shared_memory_domains()) {
      // The sender's feedback words are mapped here: a plain atomic, neither counter.
      EXPECT_EQ(got.notices_by_atomic + got.notices_by_message, 0u) << "same machine";
    } else if (atomic) {
      EXPECT_GE(got.notices_by_atomic, k);
      EXPECT_EQ(got.notices_by_message, 0u);
    } else {
      EXPECT_GE(got.notices_by_message, k);
      EXPECT_EQ(got.notices_by_atomic, 0u);
    }
  });
}

}  // namespace

TEST(InvokeFeatures, NoticesTakeTheConfiguredPathWrite) {
  notices_take_the_configured_path<channel::write>();
}
TEST(InvokeFeatures, NoticesTakeTheConfiguredPathTrad) {
  notices_take_the_configured_path<channel::trad>();
}

namespace {

// Functions registered under ids of the application's choosing (before main, in every process):
// callers name them by id and pass closures of the same layout, without the types.
struct add_to_inbox {
  std::uint64_t amount;
  void operator()(thread_context& self) const {
    inbox_of(self).bytes += amount;
    ++inbox_of(self).calls;
  }
};
struct count_buffer {
  std::uint64_t expected;
  void operator()(thread_context& self, std::span<std::byte> buffer) const {
    if (buffer.size() != expected) ++inbox_of(self).wrong;
    inbox_of(self).bytes += buffer.size();
    ++inbox_of(self).calls;
  }
};
struct square {
  std::uint64_t x;
  std::uint64_t operator()() const { return x * x; }
};
const fabric::function_id add_id = fabric::register_function<add_to_inbox>(501, "tests.add");
const fabric::function_id buffer_id =
    fabric::register_function<count_buffer, fabric::buffer_shape>(502, "tests.count_buffer");
const fabric::function_id square_id =
    fabric::register_function<square, fabric::return_shape>(503, "tests.square");

struct one_word {  // the callers' view of the closures above: one 8-byte capture
  std::uint64_t value;
};

template <channel C>
void calls_by_registered_id() {
  reset_inboxes();
  auto& rt = test::rt();
  rt.run([](thread_context& ctx) {
    const fabric::thread_id dest = (ctx.id() + 1) % ctx.thread_count();
    using retry = invoke::policy::retry;
    const std::vector<std::byte> bytes(300, std::byte{9});
    EXPECT_EQ((invoke::call_registered<C, retry>(ctx, dest, 501, one_word{7})), call_status::ok);
    EXPECT_EQ((invoke::call_registered<C, retry>(ctx, dest, buffer_id, one_word{300}, bytes)),
              call_status::ok);
    fabric::return_slot<std::uint64_t> squared;
    EXPECT_EQ((invoke::call_return_registered<C, retry>(ctx, dest, 503, one_word{ctx.id() + 3},
                                                       squared)),
              call_status::ok);
    if constexpr (C == channel::trad) invoke::channels_of(ctx).flush(ctx);
    ASSERT_EQ(ctx.wait_for(squared, std::chrono::seconds(60)), fabric::outcome::done);
    EXPECT_EQ(squared.value(), std::uint64_t{ctx.id() + 3} * (ctx.id() + 3));
    // Refused at the call site: an id nobody registered, a closure of another size, a
    // value-returning function called without a slot, a slot of another size.
    EXPECT_THROW((invoke::call_registered<C>(ctx, dest, 599, one_word{1})), seriema::error);
    EXPECT_THROW((invoke::call_registered<C>(ctx, dest, add_id, std::uint32_t{1})),
                 seriema::error);
    EXPECT_THROW((invoke::call_registered<C>(ctx, dest, square_id, one_word{1})), seriema::error);
    fabric::return_slot<std::uint32_t> narrow;
    EXPECT_THROW((invoke::call_return_registered<C>(ctx, dest, square_id, one_word{1}, narrow)),
                 seriema::error);
  });
  for (int t = 0; t < rt.options().threads_per_process; ++t) {
    EXPECT_EQ(inboxes[t].calls, 2u) << "local thread " << t;
    EXPECT_EQ(inboxes[t].bytes, 307u);
    EXPECT_EQ(inboxes[t].wrong, 0u);
  }
}

}  // namespace

// Type-derived ids are made as SERIEMA_FUNCTION_IDS says: the type name's hash, or the code
// offset of the function's invoker in this binary.
TEST(InvokeFeatures, FunctionIdsFollowTheSetting) {
  using wrapper = fabric::function_wrapper<add_to_inbox, fabric::plain_shape>;
  const char* setting = std::getenv("SERIEMA_FUNCTION_IDS");
  const bool by_address = setting != nullptr && std::string(setting) == "address";
  const auto& registry = fabric::function_registry::instance();
  EXPECT_EQ(registry.id_mode(),
            by_address ? fabric::function_id_mode::address : fabric::function_id_mode::hash);
  EXPECT_EQ(wrapper::id, by_address ? fabric::function_id_of_address(&wrapper::invoke)
                                    : fabric::function_id_of_name(typeid(wrapper).name()));
  ASSERT_NE(registry.find(wrapper::id), nullptr);
  EXPECT_EQ(registry.find(wrapper::id)->invoke, &wrapper::invoke);
}
TEST(InvokeFeatures, CallsByRegisteredIdSend) { calls_by_registered_id<channel::send>(); }
TEST(InvokeFeatures, CallsByRegisteredIdWrite) { calls_by_registered_id<channel::write>(); }
TEST(InvokeFeatures, CallsByRegisteredIdTrad) { calls_by_registered_id<channel::trad>(); }
TEST(InvokeFeatures, CallsByRegisteredIdOvfl) { calls_by_registered_id<channel::ovfl>(); }

TEST(InvokeFeatures, SynchronizersOnEveryPrimitiveSend) {
  synchronizers_on_every_primitive<channel::send>();
}
TEST(InvokeFeatures, SynchronizersOnEveryPrimitiveWrite) {
  synchronizers_on_every_primitive<channel::write>();
}
TEST(InvokeFeatures, SynchronizersOnEveryPrimitiveTrad) {
  synchronizers_on_every_primitive<channel::trad>();
}
TEST(InvokeFeatures, SynchronizersOnEveryPrimitiveOvfl) {
  synchronizers_on_every_primitive<channel::ovfl>();
}
TEST(InvokeFeatures, BroadcastsWithSynchronizersSend) {
  broadcasts_with_synchronizers<channel::send>();
}
TEST(InvokeFeatures, BroadcastsWithSynchronizersWrite) {
  broadcasts_with_synchronizers<channel::write>();
}
TEST(InvokeFeatures, BroadcastsWithSynchronizersTrad) {
  broadcasts_with_synchronizers<channel::trad>();
}
TEST(InvokeFeatures, BroadcastsWithSynchronizersOvfl) {
  broadcasts_with_synchronizers<channel::ovfl>();
}

namespace {

std::atomic<bool> called_back{false};

// RetryAsync and delegated receiving: calls queued behind a full ring (tiny chunks, gated
// destination) are finished by the process's helper thread while their caller sits in a
// helped_section without polling, and a call addressed to the caller is run meanwhile too.
template <channel C>
void helpers_finish_queued_calls() {
  reset_inboxes();
  auto& rt = test::rt();
  if (rt.options().threads_per_process < 2) GTEST_SKIP() << "needs 2 threads per process";
  gate_open = false;
  gate_entered = false;
  called_back = false;
  const fabric::thread_id caller = 0;
  const fabric::thread_id gated = threads() - 1;
  const fabric::thread_id opener = gated - 1;
  constexpr std::uint64_t n = 2000;
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != caller) return;
    invoke::messenger_options small = invoke::channels_of(ctx).options();
    small.chunk_size = 8192;
    small.chunks_per_allocation = 1;
    small.max_chunks = 2;
    invoke::channels_of(ctx).set_options(small);
    close_gate<C>(ctx, gated);
    invoke::synchronizer consumed(ctx, n);
    for (std::uint64_t i = 0; i < n; ++i) {
      ASSERT_EQ((invoke::call<C, invoke::policy::retry_async, notify_on::consume>(
                    ctx, gated,
                    [i](thread_context& self) {
                      inbox& box = inbox_of(self);
                      if (box.next_seq[0] != i) ++box.wrong;  // FIFO through the queue
                      box.next_seq[0] = i + 1;
                      ++box.calls;
                    },
                    consumed)),
                call_status::ok);
    }
    ASSERT_GT(invoke::channels_of(ctx).to(gated).queued_bytes(), 0u) << "nothing was queued";
    ASSERT_EQ((invoke::call<C, invoke::policy::retry_async>(ctx, gated, [caller](thread_context& self) {
                ASSERT_EQ(self.call(caller, [] { called_back = true; }), call_status::ok);
              })),
              call_status::ok);
    ASSERT_EQ(ctx.call(opener, [] { gate_open.store(true, std::memory_order_release); }),
              call_status::ok);
    {
      fabric::helped_section section(ctx);
      // No poll of ctx here: only a helper can move the queue and run the call back.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!(consumed.done() && called_back.load()) &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    EXPECT_TRUE(consumed.done()) << consumed.remaining() << " calls never consumed";
    EXPECT_TRUE(called_back.load()) << "the call to the helped thread did not run";
  });
  if (const test::inbox* got = test::inbox_here(gated)) {
    EXPECT_EQ(got->calls, n);
    EXPECT_EQ(got->wrong, 0u);
  }
}

}  // namespace

TEST(InvokeFeatures, HelpersFinishQueuedCallsWrite) { helpers_finish_queued_calls<channel::write>(); }
TEST(InvokeFeatures, HelpersFinishQueuedCallsTrad) { helpers_finish_queued_calls<channel::trad>(); }
TEST(InvokeFeatures, HelpersFinishQueuedCallsOvfl) { helpers_finish_queued_calls<channel::ovfl>(); }

namespace {

// call_buffer_get, sync and async: the destination reads the caller's registered memory; the
// caller's synchronizer tells it when the memory may change again.
template <channel C>
void get_variants() {
  reset_inboxes();
  auto& rt = test::rt();
  rt.run([](thread_context& ctx) {
    const std::uint32_t me = ctx.id();
    const fabric::thread_id dest = (me + 1) % ctx.thread_count();
    constexpr std::size_t size = 5000;
    transfer::remote_memory_locator origin = ctx.allocate_remote(me, size);
    std::span<std::byte> bytes(reinterpret_cast<std::byte*>(origin.address), size);
    fill_pattern(bytes, me);
    const std::uint64_t sum = checksum(bytes);
    auto check = [dest, sum](thread_context& self, std::span<std::byte> got) {
      inbox& box = inbox_of(self);
      if (self.id() != dest || got.size() != size || checksum(got) != sum) ++box.wrong;
      box.bytes += got.size();
      ++box.calls;
    };
    invoke::synchronizer read(ctx, 3);
    ASSERT_EQ((invoke::call_buffer_get_async<C, invoke::policy::retry>(ctx, dest, check, origin,
                                                                      read)),
              call_status::ok);
    ASSERT_EQ((invoke::call_buffer_get<C, invoke::policy::retry, notify_on::consume>(
                  ctx, dest, check, origin, read)),
              call_status::ok);
    ASSERT_EQ((invoke::call_buffer_get_async<C, invoke::policy::retry>(ctx, dest, check, origin,
                                                                      read)),
              call_status::ok);
    EXPECT_TRUE(read.wait());
    // Every read is done: the memory is ours again.
    std::memset(bytes.data(), 0, bytes.size());
    ctx.free_remote(origin);
  });
  for (int t = 0; t < rt.options().threads_per_process; ++t) {
    EXPECT_EQ(inboxes[t].calls, 3u) << "local thread " << t;
    EXPECT_EQ(inboxes[t].bytes, 15000u);
    EXPECT_EQ(inboxes[t].wrong, 0u);
  }
}

}  // namespace

TEST(InvokeFeatures, GetVariantsSend) { get_variants<channel::send>(); }
TEST(InvokeFeatures, GetVariantsWrite) { get_variants<channel::write>(); }
TEST(InvokeFeatures, GetVariantsTrad) { get_variants<channel::trad>(); }

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }
