// Ordered multicast groups across the worker threads of one or several processes: every member
// sends irregular messages and all deliver them in one total order (the hash of the delivered
// sequence is compared at member 0 through calls, not through the group); the unordered mode
// keeps each sender's order; a lone sender's messages still flow (nulls); ordered calls replicate
// a state machine; a slow member holds the window; empty and oversized messages, bad options,
// members that disagree, and sends after close.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <seriema/base/error.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/transfer/ucx.hpp>
#include <seriema/group/group.hpp>
#include <seriema/invoke/invoke.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/mp_main.hpp"

using namespace seriema;
using fabric::thread_context;
using group::group_status;

namespace {

constexpr auto phase = std::chrono::seconds(60);

fabric::deadline_clock::time_point phase_end() { return fabric::deadline_clock::now() + phase; }

std::vector<fabric::thread_id> every_worker(const thread_context& me) {
  std::vector<fabric::thread_id> all(me.thread_count());
  for (fabric::thread_id t = 0; t < all.size(); ++t) all[t] = t;
  return all;
}

// Byte i of message `index` of `sender`.
std::byte content(std::uint64_t sender, std::uint64_t index, std::size_t i) {
  return static_cast<std::byte>((sender * 131 + index * 31 + i * 7) & 0xff);
}
std::size_t size_of(std::uint64_t sender, std::uint64_t index, std::size_t max) {
  return (sender * 977 + index * 7919) % (max + 1);  // 0 .. max, empty messages included
}

// What one member saw, by delivery: per-sender order, content, and a hash of the sequence.
struct delivery_log {
  std::vector<std::uint64_t> next_index;  // per sender
  std::uint64_t hash = 1469598103934665603ull;
  std::uint64_t count = 0;
  std::uint64_t last_position = 0;
  bool positions_rise = true;
  std::string first_problem;
  std::size_t small_max = 0;  // not 0: odd messages of a sender are at most this long

  explicit delivery_log(std::size_t members) : next_index(members, 0) {}
  // The size bound of message `index` (sizes alternate between large and small ones).
  std::size_t bound(std::uint64_t index, std::size_t max) const {
    return small_max != 0 && index % 2 == 1 ? small_max : max;
  }
  void note(const group::message& m, std::size_t max) {
    if (m.index != next_index[m.sender] && first_problem.empty()) {
      first_problem = "sender " + std::to_string(m.sender) + " message " +
                      std::to_string(m.index) + " expected " +
                      std::to_string(next_index[m.sender]);
    }
    next_index[m.sender] = m.index + 1;
    bool intact = m.payload.size() == size_of(m.thread, m.index, bound(m.index, max));
    for (std::size_t i = 0; intact && i < m.payload.size(); ++i) {
      intact = m.payload[i] == content(m.thread, m.index, i);
    }
    if (!intact && first_problem.empty()) {
      first_problem = "message " + std::to_string(m.index) + " of " + std::to_string(m.sender) +
                      " is damaged";
    }
    if (count > 0 && m.position <= last_position) positions_rise = false;
    last_position = m.position;
    for (std::uint64_t word : {std::uint64_t{m.sender}, m.index}) {
      hash = (hash ^ word) * 1099511628211ull;
    }
    ++count;
  }
};

thread_local std::uint64_t published_hash = 0;

// Once every member published its hash, member 0 asks each for it (a call, not the group) and
// compares.
void expect_same_hash_everywhere(thread_context& me, const std::vector<fabric::thread_id>& members) {
  me.quiesce(phase);
  if (me.id() == members[0]) {
    for (fabric::thread_id t : members) {
      auto theirs = invoke::call_return(me, t, [] { return published_hash; });
      ASSERT_EQ(theirs.wait(phase_end()), fabric::outcome::done);
      EXPECT_EQ(theirs.get(), published_hash) << "member thread " << t << " delivered otherwise";
    }
  }
  me.quiesce(phase);
}

// Pushes of a burst of sends: across machines they share pushes (Nagle's rule: a send's
// message waits while the member has not answered for the last push, docs/group.md), so there
// are fewer pushes than messages times members; stores always go at once.
void expect_burst_pushes(const group::group& g) {
  std::size_t remote = 0;
  const std::size_t others = g.members().size() - 1;
  for (std::uint32_t m = 0; m < g.members().size(); ++m) {
    if (m != g.rank() && g.path_to(m) != "direct stores") ++remote;
  }
  const group::group_counters& c = g.counters();
  if (remote == others && others > 0) {
    EXPECT_GT(c.pushes_held, 0u) << "no send of a burst found a member that had not answered";
    EXPECT_LT(c.message_pushes, (c.sent + c.nulls) * others) << "a push per message and member";
  } else if (remote == 0) {
    EXPECT_EQ(c.pushes_held, 0u) << "a push by stores was held back";
  }
}

struct stream_plan {
  group::group_options options;
  std::uint64_t per_sender = 300;
  bool everyone_sends = true;
  int slow_member = -1;  // this member sleeps 1 ms every 8 deliveries
  std::size_t largest = 0;  // message sizes go up to this (0: options.max_message)
};

void stream(thread_context& me, const stream_plan& plan) {
  const std::vector<fabric::thread_id> members = every_worker(me);
  const std::size_t max = plan.largest != 0 ? plan.largest : plan.options.max_message;
  delivery_log log(members.size());
  if (plan.largest != 0) log.small_max = plan.options.max_message;
  const bool slow = static_cast<int>(me.id()) == plan.slow_member;
  group::group g = group::group::create(
      me, members, plan.options, phase_end(), [&](const group::message& m) {
        log.note(m, max);
        if (slow && log.count % 8 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      });
  const bool sends = plan.everyone_sends || g.rank() == 0;
  const std::uint64_t senders = plan.everyone_sends ? members.size() : 1;
  for (std::uint64_t i = 0; sends && i < plan.per_sender; ++i) {
    const std::size_t n = size_of(me.id(), i, log.bound(i, max));
    const group_status sent = g.send(
        n,
        [&](std::span<std::byte> room) {
          for (std::size_t b = 0; b < room.size(); ++b) room[b] = content(me.id(), i, b);
        },
        phase_end());
    ASSERT_EQ(sent, group_status::ok) << group::to_string(sent) << " at message " << i;
  }
  ASSERT_TRUE(me.wait_until([&] { return log.count == senders * plan.per_sender; }, phase_end()))
      << "delivered " << log.count << " of " << senders * plan.per_sender;
  EXPECT_EQ(g.flush(phase_end()), group_status::ok);
  EXPECT_EQ(log.first_problem, "");
  EXPECT_TRUE(log.positions_rise);
  EXPECT_EQ(g.counters().rejected_slots, 0u);
  EXPECT_EQ(g.counters().delivered, senders * plan.per_sender);
  if (!plan.everyone_sends && g.rank() != 0 && plan.options.mode == group::delivery::ordered) {
    EXPECT_GT(g.counters().nulls, 0u) << "a quiet member sent no null: the order could not move";
  }
  if (sends && plan.per_sender >= 100) expect_burst_pushes(g);
  published_hash = log.hash;
  if (plan.options.mode == group::delivery::ordered) expect_same_hash_everywhere(me, members);
  me.quiesce(phase);
}

TEST(Group, EveryMemberDeliversTheSameTotalOrder) {
  stream_plan plan;
  plan.options.max_message = 2048;
  test::rt().run([&](thread_context& me) { stream(me, plan); });
}

TEST(Group, PushesByPutAndByMessageKeepTheOrder) {
  for (group::remote_push push : {group::remote_push::put, group::remote_push::message}) {
    stream_plan plan;
    plan.options.max_message = 512;
    plan.options.push = push;
    plan.per_sender = 150;
    test::rt().run([&](thread_context& me) { stream(me, plan); });
  }
}

// Messages above max_message go down the chain of large areas (block by block, each member
// passing them on), delivered intact, in the one total order with the small ones; the members in
// the middle of a chain pushed bytes on; past max_large_message a send is too_large.
TEST(Group, LargeMessagesTravelTheChainInTheOneOrder) {
  for (group::delivery mode : {group::delivery::ordered, group::delivery::unordered}) {
    for (group::remote_push push : {group::remote_push::put, group::remote_push::message}) {
      stream_plan plan;
      plan.options.max_message = 1024;
      plan.options.max_large_message = 600 << 10;  // 3 blocks of the chain
      plan.options.large_window = 2;
      plan.options.mode = mode;
      plan.options.push = push;
      plan.largest = plan.options.max_large_message;
      plan.per_sender = 24;
      test::rt().run([&](thread_context& me) {
        stream(me, plan);
        const std::vector<fabric::thread_id> members = every_worker(me);
        group::group g = group::group::create(me, members, plan.options, phase_end());
        const auto nothing = [](std::span<std::byte>) {};
        EXPECT_EQ(g.send(plan.options.max_large_message + 1, nothing), group_status::too_large);
        // One large message per member: every member but the last of each chain passes it on.
        std::uint64_t seen = 0;
        g.on_deliver([&](const group::message& m) { seen += m.payload.size(); });
        ASSERT_EQ(g.send(300 << 10, nothing, phase_end()), group_status::ok);
        ASSERT_TRUE(me.wait_until([&] { return seen == members.size() * (300 << 10); },
                                  phase_end()));
        EXPECT_EQ(g.flush(phase_end()), group_status::ok);
        me.quiesce(phase);  // every member delivered all: every push on is done
        EXPECT_EQ(g.counters().large_sent, 1u);
        // Each member passes on every message but its successor's (that chain ends at it).
        EXPECT_EQ(g.counters().large_pushed_bytes, (members.size() - 1) * (300 << 10));
        me.quiesce(phase);
      });
    }
  }
}

TEST(Group, UnorderedKeepsEachSendersOrder) {
  stream_plan plan;
  plan.options.max_message = 2048;
  plan.options.mode = group::delivery::unordered;
  test::rt().run([&](thread_context& me) { stream(me, plan); });
}

TEST(Group, ALoneSendersMessagesFlowOnNulls) {
  stream_plan plan;
  plan.options.max_message = 256;
  plan.everyone_sends = false;
  test::rt().run([&](thread_context& me) { stream(me, plan); });
}

TEST(Group, ASlowMemberHoldsTheWindowAndLosesNothing) {
  stream_plan plan;
  plan.options.max_message = 1024;
  plan.options.window = 4;
  plan.per_sender = 200;
  plan.slow_member = 1;
  test::rt().run([&](thread_context& me) {
    stream(me, plan);
  });
}

// A replicated state machine: each member's ordered calls fold (caller, i, text) into a state
// that depends on the order; every member ends with the same state.
thread_local std::uint64_t machine_state = 0;
thread_local std::uint64_t machine_steps = 0;

TEST(Group, OrderedCallsRunInOneOrderEverywhere) {
  test::rt().run([&](thread_context& me) {
    const std::vector<fabric::thread_id> members = every_worker(me);
    group::group_options options;
    options.max_message = 256;
    group::group g = group::group::create(me, members, options, phase_end());
    machine_state = 7;
    machine_steps = 0;
    constexpr std::uint64_t calls = 100;
    std::vector<invoke::future<void>> done;
    for (std::uint64_t i = 0; i < calls; ++i) {
      const std::string text = "step " + std::to_string(i);
      done.push_back(g.ordered_call(
          [](thread_context& self, std::uint64_t caller, std::uint64_t step,
             const std::string& what) {
            machine_state = machine_state * 1000003 + caller * 131 + step + what.size();
            ++machine_steps;
            (void)self;
          },
          std::uint64_t{me.id()}, i, text));
    }
    for (auto& f : done) {
      ASSERT_EQ(f.wait(phase_end()), fabric::outcome::done);
      EXPECT_NO_THROW(f.get());
    }
    ASSERT_TRUE(me.wait_until([&] { return machine_steps == calls * members.size(); },
                              phase_end()));
    EXPECT_EQ(g.counters().calls_run, calls * members.size());
    published_hash = machine_state;
    expect_same_hash_everywhere(me, members);
  });
}

TEST(Group, AnOrderedCallThatThrowsFailsOnlyItsFuture) {
  test::rt().run([&](thread_context& me) {
    const std::vector<fabric::thread_id> members = every_worker(me);
    group::group g = group::group::create(me, members, {}, phase_end());
    auto threw = g.ordered_call([] { throw std::runtime_error("refused by the state machine"); });
    auto fine = g.ordered_call([] {});
    ASSERT_EQ(threw.wait(phase_end()), fabric::outcome::threw);
    EXPECT_EQ(threw.result(), fabric::outcome::threw);
    EXPECT_THROW(threw.get(), std::runtime_error);
    ASSERT_EQ(fine.wait(phase_end()), fabric::outcome::done);
    EXPECT_NO_THROW(fine.get());
    EXPECT_EQ(g.flush(phase_end()), group_status::ok);
    me.quiesce(phase);
    EXPECT_EQ(g.counters().calls_threw, members.size());
  });
}

TEST(Group, RefusalsSendNothing) {
  test::rt().run([&](thread_context& me) {
    const std::vector<fabric::thread_id> members = every_worker(me);
    group::group_options options;
    options.max_message = 64;
    options.window = 2;
    group::group g = group::group::create(me, members, options, phase_end());
    const auto nothing = [](std::span<std::byte>) {};
    EXPECT_EQ(g.send(65, nothing), group_status::too_large);
    auto big = g.ordered_call([](const std::string&) {}, std::string(100, 'x'));
    EXPECT_EQ(big.result(), fabric::outcome::not_executed);
    EXPECT_THROW(big.get(), invoke::call_error);
    // The window: 2 sends go, the third finds it full until the others consumed them.
    group_status third = group_status::ok;
    ASSERT_EQ(g.send(0, nothing), group_status::ok);
    ASSERT_EQ(g.send(0, nothing), group_status::ok);
    third = g.send(0, nothing);
    EXPECT_TRUE(third == group_status::full || third == group_status::ok);
    if (third == group_status::ok) {
      EXPECT_EQ(g.counters().sent, 3u);
    }
    EXPECT_EQ(g.flush(phase_end()), group_status::ok);
    EXPECT_EQ(g.send(0, nothing, phase_end()), group_status::ok);
    EXPECT_EQ(g.flush(phase_end()), group_status::ok);
    me.quiesce(phase);
    g.close();
    EXPECT_EQ(g.send(0, nothing), group_status::closed);
    auto after = g.ordered_call([] {});
    EXPECT_EQ(after.result(), fabric::outcome::not_executed);
    EXPECT_EQ(g.path_to(g.rank()), "self");
    me.quiesce(phase);
  });
}

// A member that sends a burst and closes at once: the messages its sends held back (across
// machines, Nagle's rule) leave at close, so every member delivers all of them.
TEST(Group, AMemberThatClosesRightAfterABurstLosesNone) {
  test::rt().run([&](thread_context& me) {
    const std::vector<fabric::thread_id> members = every_worker(me);
    group::group_options options;
    options.max_message = 64;
    options.window = 32;
    constexpr std::uint64_t burst = 200;
    std::uint64_t from_first = 0;
    group::group g = group::group::create(me, members, options, phase_end(),
                                          [&](const group::message& m) {
                                            if (m.sender == 0) ++from_first;
                                          });
    me.quiesce(phase);
    if (g.rank() == 0) {
      for (std::uint64_t i = 0; i < burst; ++i) {
        ASSERT_EQ(g.send(8, [](std::span<std::byte> room) { room[0] = std::byte{1}; },
                         phase_end()),
                  group_status::ok);
      }
      g.close();
    } else {
      EXPECT_TRUE(me.wait_until([&] { return from_first == burst; }, phase_end()))
          << "delivered " << from_first << " of the closed member's " << burst;
    }
    me.quiesce(phase);
  });
}

TEST(Group, CreateRefusesBadMembersAndOptions) {
  test::rt().run([&](thread_context& me) {
    std::vector<fabric::thread_id> members = every_worker(me);
    group::group_options bad;
    bad.window = 0;
    EXPECT_THROW(group::group::create(me, members, bad, phase_end()), config_error);
    bad = {};
    bad.max_message = 0;
    EXPECT_THROW(group::group::create(me, members, bad, phase_end()), config_error);
    bad = {};
    bad.max_message = 1 << 20;
    bad.window = 64;  // 64 x 1 MiB slots: more than one allocation
    EXPECT_THROW(group::group::create(me, members, bad, phase_end()), config_error);
    const std::vector<fabric::thread_id> twice = {me.id(), me.id()};
    EXPECT_THROW(group::group::create(me, twice, {}, phase_end()), error);
    const std::vector<fabric::thread_id> not_a_worker = {me.id(), me.thread_count()};
    EXPECT_THROW(group::group::create(me, not_a_worker, {}, phase_end()), error);
    if (me.thread_count() > 1) {
      // A thread that is not in the list cannot make a group of others.
      const fabric::thread_id other = (me.id() + 1) % me.thread_count();
      const std::vector<fabric::thread_id> without_me = {other};
      EXPECT_THROW(group::group::create(me, without_me, {}, phase_end()), error);
      // Members that disagree on the options: thread 0 wants a window of 8, the rest 16.
      group::group_options mine;
      if (me.id() == 0) mine.window = 8;
      EXPECT_THROW(group::group::create(me, members, mine, phase_end()), error);
    }
    me.quiesce(phase);
    // A group of this thread alone works (it delivers its own messages).
    const std::vector<fabric::thread_id> alone = {me.id()};
    group::group solo = group::group::create(me, alone, {}, phase_end());
    std::uint64_t got = 0;
    solo.on_deliver([&](const group::message& m) { got += m.payload.size(); });
    ASSERT_EQ(solo.send(5, [](std::span<std::byte> b) { std::memset(b.data(), 1, b.size()); }),
              group_status::ok);
    EXPECT_EQ(solo.flush(phase_end()), group_status::ok);
    EXPECT_EQ(got, 5u);
    me.quiesce(phase);
  });
}

// Each member's pushes take the path the placement and SERIEMA_REMOTE_PUBLISH say: stores on one
// machine, else write messages (tcp) or put + fence + put (put, or a network with RDMA).
TEST(Group, PushesTakeThePathTheSettingsSay) {
  test::rt().run([&](thread_context& me) {
    const std::vector<fabric::thread_id> members = every_worker(me);
    group::group g = group::group::create(me, members, {}, phase_end());
    const char* publish = std::getenv("SERIEMA_REMOTE_PUBLISH");
    const bool by_put = (publish != nullptr && std::string(publish) == "put") ||
                        ((publish == nullptr || std::string(publish) == "auto") &&
                         me.rt().context().network_rdma());
    // Memory of another process is mapped where UCX has a shared-memory transport.
    const bool maps = std::getenv("UCX_TLS") == nullptr;
    const std::string remote = by_put ? "put, fence, put" : "write message";
    for (std::uint32_t m = 0; m < members.size(); ++m) {
      const int process = me.rt().process_of_thread(members[m]);
      const bool here = me.rt().same_machine(process) && (maps || process == me.rt().rank());
      const std::string expected = m == g.rank() ? "self" : here ? "direct stores" : remote;
      EXPECT_EQ(g.path_to(m), expected) << "to member " << m;
    }
    me.quiesce(phase);
  });
}

TEST(Group, TwoGroupsOfTheSameMembersStayApart) {
  test::rt().run([&](thread_context& me) {
    const std::vector<fabric::thread_id> members = every_worker(me);
    std::uint64_t in_a = 0, in_b = 0;
    group::group a = group::group::create(me, members, {}, phase_end(),
                                          [&](const group::message& m) { in_a += m.payload.size(); });
    group::group b = group::group::create(me, members, {}, phase_end());
    b.on_deliver([&](const group::message& m) { in_b += m.payload.size(); });  // b: later
    ASSERT_EQ(a.send(3, [](std::span<std::byte>) {}, phase_end()), group_status::ok);
    ASSERT_EQ(b.send(5, [](std::span<std::byte>) {}, phase_end()), group_status::ok);
    ASSERT_TRUE(me.wait_until([&] { return in_a == 3 * members.size() &&
                                           in_b == 5 * members.size(); },
                              phase_end()))
        << "a: " << in_a << " bytes, " << a.delivered() << " delivered, " << a.counters().pushes
        << " pushes; b: " << in_b << " bytes, " << b.delivered() << " delivered";
    me.quiesce(phase);
  });
}

// The join test's replicated state: a hash over the data messages delivered (sender thread,
// index, first byte), which a joiner loads from the member that admits it.
thread_local std::uint64_t replica = 0;
thread_local bool may_join = false;

void apply(const group::message& m) {
  const std::uint64_t first = m.payload.empty() ? 0 : std::to_integer<std::uint64_t>(m.payload[0]);
  for (std::uint64_t word : {std::uint64_t{m.thread}, m.index, first}) {
    replica = (replica ^ word) * 1099511628211ull;
  }
}

// The last worker joins the group the others founded while they stream; it loads their state,
// then sends too. Nothing is dropped (a join without a failure drains the view), every member
// ends with the same state, and the message numbers of each sender go on at the joiner.
TEST(Group, AThreadJoinsARunningGroupWithItsState) {
  test::rt().run([&](thread_context& me) {
    const std::vector<fabric::thread_id> all = every_worker(me);
    if (all.size() < 2) GTEST_SKIP() << "a join needs 2 workers";
    const std::vector<fabric::thread_id> founders(all.begin(), all.end() - 1);
    const fabric::thread_id joiner = all.back();
    group::group_options options;
    options.max_message = 512;
    options.window = 8;
    options.capacity = static_cast<std::uint32_t>(all.size());
    constexpr std::uint64_t founder_sends = 600, joiner_sends = 100;
    replica = 1469598103934665603ull;
    may_join = false;
    std::vector<std::uint64_t> next_index(all.size(), 0);
    bool numbered = true;
    const auto on_message = [&](const group::message& m) {
      if (m.sender >= next_index.size()) return;
      constexpr std::uint64_t unknown = ~std::uint64_t{0};  // the joiner's first from a founder
      numbered = numbered && (next_index[m.sender] == unknown || m.index == next_index[m.sender]);
      next_index[m.sender] = m.index + 1;
      apply(m);
      if (me.id() == founders[0] && m.index == 20 && m.sender == 0) {
        // Midway through the stream: the joiner may ask now.
        (void)invoke::call<invoke::channel::write, invoke::policy::retry_async>(
            me, joiner, [] { may_join = true; });
      }
    };
    std::optional<group::group> g;
    std::vector<group::view> views;
    std::uint64_t loaded = 0;
    if (me.id() != joiner) {
      g.emplace(group::group::create(me, founders, options, phase_end(), on_message));
      g->on_state_transfer([] {
        std::vector<std::byte> bytes(sizeof replica);
        std::memcpy(bytes.data(), &replica, sizeof replica);
        return bytes;
      });
      g->on_view_change([&](const group::view& v) { views.push_back(v); });
    } else {
      ASSERT_TRUE(me.wait_until([] { return may_join; }, phase_end()));
      g.emplace(group::group::join(me, founders, options, phase_end(), on_message,
                                   [&](std::span<const std::byte> state) {
                                     ASSERT_EQ(state.size(), sizeof replica);
                                     std::memcpy(&replica, state.data(), sizeof replica);
                                     ++loaded;
                                   }));
      EXPECT_EQ(loaded, 1u);
      EXPECT_EQ(g->rank(), founders.size());
      EXPECT_EQ(g->current_view().members, all);
      // The founders' message numbers go on here from where the joined view began.
      for (std::size_t f = 0; f < founders.size(); ++f) next_index[f] = ~std::uint64_t{0};
    }
    const std::uint64_t mine = me.id() == joiner ? joiner_sends : founder_sends;
    for (std::uint64_t i = 0; i < mine; ++i) {
      if (me.id() != joiner && i == founder_sends - 100) {
        // The join comes while the founders stream; their last 100 go after it, so that the
        // joiner sees every founder send.
        ASSERT_TRUE(me.wait_until([&] { return !views.empty(); }, phase_end()))
            << "no view change by the deadline";
      }
      ASSERT_EQ(g->send(1 + i % 64, [&](std::span<std::byte> b) { b[0] = std::byte(i); },
                        phase_end()),
                group_status::ok)
          << "message " << i;
    }
    // Done when every sender's last message was delivered here.
    const auto all_in = [&] {
      for (std::size_t s = 0; s < all.size(); ++s) {
        const std::uint64_t last = s == founders.size() ? joiner_sends : founder_sends;
        if (next_index[s] != last) return false;
      }
      return true;
    };
    ASSERT_TRUE(me.wait_until(all_in, phase_end())) << "thread " << me.id() << " delivered "
                                                    << g->delivered();
    EXPECT_EQ(g->flush(phase_end()), group_status::ok);
    EXPECT_TRUE(numbered) << "a sender's messages were delivered out of their order";
    if (me.id() != joiner) {
      ASSERT_EQ(views.size(), 1u);
      EXPECT_EQ(views[0].joined, std::vector<fabric::thread_id>{joiner});
      EXPECT_TRUE(views[0].removed.empty());
      EXPECT_EQ(views[0].members, all);
      EXPECT_EQ(g->counters().trimmed, 0u) << "a join without a failure dropped messages";
    }
    EXPECT_EQ(g->counters().rejected_slots, 0u);
    EXPECT_EQ(g->counters().rejected_rows, 0u);
    published_hash = replica;
    expect_same_hash_everywhere(me, all);
  });
}

// A join the group cannot take is refused with the reason: no seat left, or other options.
TEST(Group, AJoinWithoutASeatOrWithOtherOptionsIsRefused) {
  test::rt().run([&](thread_context& me) {
    const std::vector<fabric::thread_id> all = every_worker(me);
    if (all.size() < 2) GTEST_SKIP() << "a join needs 2 workers";
    const std::vector<fabric::thread_id> founders(all.begin(), all.end() - 1);
    group::group_options options;
    options.capacity = static_cast<std::uint32_t>(all.size());
    if (me.id() != all.back()) {
      group::group full = group::group::create(me, founders, {}, phase_end());  // no spare seat
      group::group other = group::group::create(me, founders, options, phase_end());
      me.quiesce(phase);
    } else {
      const auto join = [&](const group::group_options& o) {
        try {
          (void)group::group::join(me, founders, o, phase_end(), {}, {});
        } catch (const error& e) {
          return std::string(e.what());
        }
        return std::string("admitted");
      };
      const std::string no_seat = join({});
      EXPECT_NE(no_seat.find("seats are taken"), std::string::npos) << no_seat;
      group::group_options wider = options;
      wider.window = 4;
      const std::string other = join(wider);
      EXPECT_NE(other.find("other group_options"), std::string::npos) << other;
      EXPECT_THROW((void)group::group::join(me, std::vector<fabric::thread_id>{me.id()}, {},
                                            phase_end(), {}, {}),
                   error);
      me.quiesce(phase);
    }
  });
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }
