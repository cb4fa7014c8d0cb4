// Send-based remote invocation between threads of several processes (shm and tcp, also across
// emulated machines): call, call_buffer, call_return, service calls, remote allocation, FIFO
// order, run()'s guarantee that every call sent was executed before it returns, and calls that
// throw (in nested polls, and under a waiting return_slot).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/transfer/transmitter.hpp>
#include <seriema/fabric/detail/messages.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/ucx.hpp>

#include "support/mp_main.hpp"

using namespace seriema;
using fabric::call_status;
using fabric::thread_context;

namespace {

constexpr int max_local_threads = 16;

// Per local thread: what arrived. Written only by the thread itself (calls run on it).
struct inbox {
  std::atomic<std::uint64_t> calls{0};
  std::atomic<std::uint64_t> source_sum{0};
  std::atomic<std::uint64_t> payload_sum{0};
  std::atomic<std::uint64_t> fifo_next{0};
  std::atomic<std::uint64_t> fifo_errors{0};
  std::atomic<std::uint64_t> wrong_thread{0};
};
std::array<inbox, max_local_threads> inboxes;

// The inbox of `thread`, a thread of this process.
inbox& local_inbox(fabric::thread_id thread) {
  return inboxes[static_cast<std::size_t>(test::rt().placement().locate(thread).local_thread)];
}
inbox& inbox_of(thread_context& ctx) { return local_inbox(ctx.id()); }

void reset_inboxes() {
  for (auto& box : inboxes) {
    box.calls = 0;
    box.source_sum = 0;
    box.payload_sum = 0;
    box.fifo_next = 0;
    box.fifo_errors = 0;
    box.wrong_thread = 0;
  }
}

// Sends `dest` the call number `seq` of a sequence; the call counts an error unless it runs
// right after number seq - 1.
call_status call_in_sequence(thread_context& ctx, fabric::thread_id dest, std::uint64_t seq) {
  return ctx.call(dest, [seq](thread_context& self) {
    inbox& box = inbox_of(self);
    if (box.fifo_next != seq) box.fifo_errors += 1;
    box.fifo_next = seq + 1;
  });
}

std::uint64_t expected_calls_per_thread() { return test::rt().placement().thread_count() - 1; }

}  // namespace

TEST(InvokeSend, CallRunsOnTheRightThreadWithItsCaptures) {
  reset_inboxes();
  auto& rt = test::rt();
  rt.run([](thread_context& ctx) {
    for (fabric::thread_id dest = 0; dest < ctx.thread_count(); ++dest) {
      if (dest == ctx.id()) continue;
      std::uint32_t from = ctx.id();
      std::uint64_t token = 1000 + dest;
      ASSERT_EQ(ctx.call(dest,
                         [from, dest, token](thread_context& self) {
                           inbox& box = inbox_of(self);
                           if (self.id() != dest || token != 1000 + dest) box.wrong_thread += 1;
                           box.source_sum += from;
                           box.calls += 1;
                         }),
                call_status::ok);
    }
  });
  // run() returned: every call was executed. Check this process's threads.
  std::uint64_t all_ids = 0;
  for (fabric::thread_id t = 0; t < rt.placement().thread_count(); ++t) all_ids += t;
  for (int t = 0; t < rt.options().threads_per_process; ++t) {
    fabric::thread_id me = rt.placement().global_id(rt.rank(), t);
    EXPECT_EQ(inboxes[t].calls.load(), expected_calls_per_thread()) << "thread " << me;
    EXPECT_EQ(inboxes[t].source_sum.load(), all_ids - me) << "thread " << me;
    EXPECT_EQ(inboxes[t].wrong_thread.load(), 0u);
  }
}

TEST(InvokeSend, CallBufferCarriesTheBuffer) {
  reset_inboxes();
  auto& rt = test::rt();
  rt.run([](thread_context& ctx) {
    std::vector<std::byte> data(1000 + ctx.id() * 37);
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < data.size(); ++i) {
      data[i] = static_cast<std::byte>((i * 13 + ctx.id()) & 0xff);
      sum += std::to_integer<unsigned>(data[i]);
    }
    for (fabric::thread_id dest = 0; dest < ctx.thread_count(); ++dest) {
      if (dest == ctx.id()) continue;
      std::uint64_t size = data.size();
      ASSERT_EQ(ctx.call_buffer(dest,
                                [size, sum](thread_context& self, std::span<std::byte> buffer) {
                                  inbox& box = inbox_of(self);
                                  std::uint64_t got = 0;
                                  for (auto b : buffer) got += std::to_integer<unsigned>(b);
                                  if (buffer.size() != size || got != sum) box.wrong_thread += 1;
                                  box.payload_sum += got;
                                  box.calls += 1;
                                },
                                data),
                call_status::ok);
    }
  });
  for (int t = 0; t < rt.options().threads_per_process; ++t) {
    EXPECT_EQ(inboxes[t].calls.load(), expected_calls_per_thread());
    EXPECT_EQ(inboxes[t].wrong_thread.load(), 0u);
  }
}

TEST(InvokeSend, CallReturnBringsTheValueBack) {
  std::atomic<int> errors{0};
  test::rt().run([&errors](thread_context& ctx) {
    for (fabric::thread_id dest = 0; dest < ctx.thread_count(); ++dest) {
      std::uint64_t x = 7 * ctx.id() + 3;
      fabric::return_slot<std::uint64_t> slot;
      if (ctx.call_return(dest, [x](thread_context& self) { return x * 1000 + self.id(); }, slot) !=
          call_status::ok) {
        errors += 1;
        continue;
      }
      ctx.wait_for(slot);
      if (!slot.ready() || slot.value() != x * 1000 + dest) errors += 1;
    }
  });
  EXPECT_EQ(errors.load(), 0);
}

TEST(InvokeSend, FifoPerSenderOverManyCalls) {
  reset_inboxes();
  auto& rt = test::rt();
  constexpr std::uint64_t calls = 100'000;
  const fabric::thread_id last = rt.placement().thread_count() - 1;
  rt.run([last](thread_context& ctx) {
    if (ctx.id() != 0) return;
    for (std::uint64_t seq = 0; seq < calls; ++seq) {
      ASSERT_EQ(call_in_sequence(ctx, last, seq), call_status::ok);
      if (seq % 256 == 0) ctx.poll();
    }
  });
  if (rt.is_local(last)) {
    inbox& box = local_inbox(last);
    EXPECT_EQ(box.fifo_next.load(), calls);
    EXPECT_EQ(box.fifo_errors.load(), 0u);
  }
}

// A call to the thread that is itself progressing the process worker skips its locked queue
// (runtime::on_call_message); the other threads of the process progress it too and queue calls,
// so the sender's FIFO must hold across both paths. With a service thread no worker progresses
// the process worker and nothing takes the shortcut.
TEST(InvokeSend, CallsToThePollingThreadKeepFifoWithoutTheQueue) {
  reset_inboxes();
  auto& rt = test::rt();
  constexpr std::uint64_t rounds = 2'000;
  const fabric::thread_id last = rt.placement().thread_count() - 1;
  const std::uint64_t handed_before = rt.counters().handed_to_poller.load();
  std::atomic<int> errors{0};
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != 0) return;
    for (std::uint64_t seq = 0; seq < rounds; ++seq) {
      ASSERT_EQ(call_in_sequence(ctx, last, seq), call_status::ok);
      fabric::return_slot<std::uint64_t> slot;
      ASSERT_EQ(ctx.call_return(
                    last, [](thread_context& self) { return inbox_of(self).fifo_next.load(); },
                    slot),
                call_status::ok);
      ctx.wait_for(slot);
      if (!slot.ready() || slot.value() != seq + 1) errors += 1;
    }
  });
  EXPECT_EQ(errors.load(), 0);
  if (rt.is_local(last) && rt.placement().locate(last).process != 0) {
    inbox& box = local_inbox(last);
    EXPECT_EQ(box.fifo_next.load(), rounds);
    EXPECT_EQ(box.fifo_errors.load(), 0u);
    const std::uint64_t handed = rt.counters().handed_to_poller.load() - handed_before;
    if (rt.has_service_thread()) {
      EXPECT_EQ(handed, 0u);
    } else {
      EXPECT_GT(handed, 0u) << "no call reached its polling destination without the queue";
    }
  }
}

TEST(InvokeSend, RemoteAllocationInTheOwnersZoneThenPut) {
  std::atomic<int> errors{0};
  auto& rt = test::rt();
  rt.run([&](thread_context& ctx) {
    fabric::thread_id owner = (ctx.id() + rt.options().threads_per_process) % ctx.thread_count();
    auto locator = ctx.allocate_remote(owner, 4096);
    if (locator.process != rt.placement().locate(owner).process || locator.size != 4096) errors += 1;
    // Write into it one-sidedly, then ask the owner to check the bytes.
    std::vector<std::byte> data(4096, static_cast<std::byte>(ctx.id() + 1));
    {
      transfer::ucx_endpoint& ep = ctx.endpoint_to(locator.process);
      transfer::remote_memory remote(ep, locator, rt.same_machine(locator.process));
      transfer::transmitter tx(ep, {});
      if (tx.put(data, remote, 0) != transfer::op_status::ok) errors += 1;
      // Wait serving calls (which progresses this process's worker): over tcp the put completes
      // when the owner's process acknowledges it, and every thread of the job is putting now, so
      // a wait that progressed only this thread's worker (tx.flush()) could wait forever.
      const transfer::completion_tag done = tx.current_tag();
      tx.request_completion();
      ctx.wait_until([&] { return done.is_complete() || ep.failed(); });
      if (!done.is_complete() || tx.failed()) errors += 1;
    }
    std::uint64_t address = locator.address;
    std::uint32_t writer = ctx.id();
    fabric::return_slot<int> verdict;
    ASSERT_EQ(ctx.call_return(owner,
                              [address, writer] {
                                auto* p = reinterpret_cast<const std::byte*>(address);
                                for (int i = 0; i < 4096; ++i) {
                                  if (p[i] != static_cast<std::byte>(writer + 1)) return 0;
                                }
                                return 1;
                              },
                              verdict),
              call_status::ok);
    ctx.wait_for(verdict);
    if (!verdict.ready() || verdict.value() != 1) errors += 1;
    ctx.free_remote(locator);
    EXPECT_THROW(ctx.free_remote(locator), seriema::error);  // double free is refused
  });
  EXPECT_EQ(errors.load(), 0);
}

TEST(InvokeSend, ServiceCallsRunOnTheTargetProcess) {
  std::atomic<int> errors{0};
  auto& rt = test::rt();
  rt.run([&](thread_context& ctx) {
    for (int p = 0; p < rt.size(); ++p) {
      fabric::return_slot<int> slot;
      ASSERT_EQ(ctx.service_call_return(p, [](thread_context& server) { return server.rt().rank(); },
                                        slot),
                call_status::ok);
      ctx.wait_for(slot);
      if (!slot.ready() || slot.value() != p) errors += 1;
    }
    const fabric::thread_id past_every_slot = rt.attached_id(rt.size(), 0) + 5;
    EXPECT_EQ(ctx.call(past_every_slot, [] {}), call_status::bad_destination);
  });
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(rt.counters().rejected(), 0u);
}

namespace {

struct thrown_on_purpose {
  int tag;
};
// Set by a call on the helper's (or the runner's) process; read by calls waiting there.
std::atomic<bool> flag_set{false};
std::atomic<bool> go{false};

}  // namespace

// A call that throws while its thread waits inside another call (a poll nested in that call):
// the waiting call is not abandoned (its caller gets the value, not a failure), and the
// exception comes out of the thread's own outer poll afterwards, once. The runner's waiting call
// can only finish after the throwing one ran, so the throw happens inside the nested poll.
TEST(InvokeSend, AThrowInANestedPollWaitsForTheCallItInterrupted) {
  auto& rt = test::rt();
  flag_set = false;
  const fabric::thread_id caller = 0;
  const fabric::thread_id helper = 1;
  const fabric::thread_id runner = rt.placement().thread_count() - 1;
  std::atomic<int> caught{0}, wrong{0}, answer_state{0};
  std::atomic<std::uint64_t> answer{0};
  rt.run([&](thread_context& ctx) {
    if (ctx.id() == runner) {
      test::poll_catching<thrown_on_purpose>(
          ctx, [&] { return caught > 0; },
          [&](const thrown_on_purpose& thrown) {
            if (thrown.tag != 3) ++wrong;
            ++caught;
          });
      return;
    }
    if (ctx.id() != caller) return;
    fabric::return_slot<std::uint64_t> slot;
    ASSERT_EQ(ctx.call_return(
                  runner,
                  [helper](thread_context& self) -> std::uint64_t {
                    fabric::return_slot<std::uint64_t> inner;
                    auto waits_for_flag = [](thread_context& h) -> std::uint64_t {
                      h.wait_until([] { return flag_set.load(); });
                      return 40;
                    };
                    if (self.call_return(helper, waits_for_flag, inner) != call_status::ok) {
                      return 0;
                    }
                    self.wait_for(inner);
                    return inner.ready() ? inner.value() + 2 : 0;
                  },
                  slot),
              call_status::ok);
    ASSERT_EQ(ctx.call(runner,
                       [helper](thread_context& self) {
                         (void)self.call(helper, [] { flag_set = true; });
                         throw thrown_on_purpose{3};
                       }),
              call_status::ok);
    ctx.wait_for(slot);
    answer_state = slot.ready() ? 1 : slot.failed() ? 2 : 0;
    answer = slot.value();
  });
  if (rt.is_local(caller)) {
    EXPECT_EQ(answer_state.load(), 1) << "the interrupted call did not complete (2 = failed)";
    EXPECT_EQ(answer.load(), 42u);
  }
  if (rt.is_local(runner)) {
    EXPECT_EQ(caught.load(), 1);
    EXPECT_EQ(wrong.load(), 0);
  }
}

// A return_slot left by an exception (its wait threw) closes its entry: the reply that arrives
// afterwards is counted as a bad reply instead of being written where the slot was.
// A value larger than a reply cell: its slot takes the caller thread's reply table.
struct table_value {
  std::uint64_t words[8];
};
static_assert(sizeof(table_value) > fabric::reply_cell::value_capacity);

// The rejection is counted where the late reply is dropped: at the caller's process for a
// message, at the callee's for a write into a same-machine caller's cell; the job's sum is 1.
template <class Value>
void late_reply_is_dropped() {
  auto& rt = test::rt();
  go = false;
  const fabric::thread_id caller = 0;
  const fabric::thread_id runner = rt.placement().thread_count() - 1;
  const std::uint64_t rejected_before = rt.counters().rejected_bad_reply.load();
  std::atomic<int> caught{0}, not_thrown{0};
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != caller) return;
    {
      fabric::return_slot<Value> slot;
      ASSERT_EQ(ctx.call_return(runner,
                                [caller](thread_context& self) -> Value {
                                  (void)self.call(caller, [] { throw thrown_on_purpose{5}; });
                                  self.wait_until([] { return go.load(); });
                                  return Value{99};
                                },
                                slot),
                call_status::ok);
      try {
        ctx.wait_for(slot);  // runs the throwing call: the wait is left, the slot destroyed
        ++not_thrown;
      } catch (const thrown_on_purpose&) {
        ++caught;
      }
    }
    // The late reply then finds its cell closed (or its table entry gone): run() ends once it
    // has been dealt with either way.
    ASSERT_EQ(ctx.call(runner, [] { go = true; }), call_status::ok);
  });
  if (rt.is_local(caller)) {
    EXPECT_EQ(caught.load(), 1);
    EXPECT_EQ(not_thrown.load(), 0);
  }
  EXPECT_EQ(rt.allreduce_sum(rt.counters().rejected_bad_reply.load() - rejected_before), 1u);
}

TEST(InvokeSend, ASlotLeftByAnExceptionDropsItsLateReply) {
  late_reply_is_dropped<std::uint64_t>();  // a reply cell
}

TEST(InvokeSend, ATableSlotLeftByAnExceptionDropsItsLateReply) {
  late_reply_is_dropped<table_value>();
}

// Small values land in the caller's reply cell: written there directly by a callee in another
// process on the same machine when shared memory maps (counted in replies_direct), otherwise by
// the caller's process on a reply message. Each thread keeps more call_returns outstanding than
// it has cells (SERIEMA_REPLY_CELLS=8 for this program), so the rest take the reply table, and
// values larger than a cell always do.
TEST(InvokeSend, SmallValuesLandInTheCallersCellDirectlyOnOneMachine) {
  auto& rt = test::rt();
  ASSERT_EQ(rt.options().reply_cells, 8u);
  using big_value = table_value;
  constexpr int outstanding = 12;
  constexpr int rounds = 50;
  const std::uint64_t direct_before = rt.counters().replies_direct.load();
  std::atomic<int> errors{0};
  std::atomic<std::uint64_t> to_mappable_peers{0};
  rt.run([&](thread_context& ctx) {
    const fabric::thread_id dest = (ctx.id() + 1) % ctx.thread_count();
    const int dest_process = rt.placement().locate(dest).process;
    for (int round = 0; round < rounds; ++round) {
      std::array<fabric::return_slot<std::uint64_t>, outstanding> small;
      fabric::return_slot<big_value> big;
      for (int i = 0; i < outstanding; ++i) {
        const std::uint64_t expect = std::uint64_t{ctx.id()} << 32 | (round * 100 + i);
        ASSERT_EQ(ctx.call_return(dest, [expect] { return expect; }, small[i]), call_status::ok);
      }
      const std::uint64_t seed = ctx.id() * 1000 + round;
      ASSERT_EQ(ctx.call_return(
                    dest,
                    [seed] {
                      big_value v{};
                      for (std::uint64_t w = 0; w < 8; ++w) v.words[w] = seed + w;
                      return v;
                    },
                    big),
                call_status::ok);
      for (int i = 0; i < outstanding; ++i) {
        ctx.wait_for(small[i]);
        const std::uint64_t expect = std::uint64_t{ctx.id()} << 32 | (round * 100 + i);
        if (!small[i].ready() || small[i].value() != expect) errors += 1;
      }
      ctx.wait_for(big);
      for (std::uint64_t w = 0; w < 8; ++w) {
        if (!big.ready() || big.value().words[w] != seed + w) errors += 1;
      }
    }
    if (dest_process != rt.rank() && !rt.reply_cells_of(dest_process).empty()) {
      to_mappable_peers += rounds * std::min(outstanding, 8);
    }
  });
  EXPECT_EQ(errors.load(), 0);
  // Written directly: the replies to the cell-backed slots of every thread whose destination is
  // in another process on this machine (the callee counts them, so compare the job's sums).
  const std::uint64_t direct =
      rt.allreduce_sum(rt.counters().replies_direct.load() - direct_before);
  const std::uint64_t expected = rt.allreduce_sum(to_mappable_peers.load());
  EXPECT_EQ(direct, expected);
  const bool shm_between_processes = rt.size() > 1 && !test::tcp_only() && rt.same_machine(
      (rt.rank() + 1) % rt.size());
  if (shm_between_processes) {
    EXPECT_GT(direct, 0u) << "no reply took the direct path over shm";
  } else {
    EXPECT_EQ(direct, 0u);
  }
}

// Wire safety of calls and replies: a call whose source names no thread or service of the job
// (its reply would go nowhere) is malformed; a reply naming a cell outside the region, a cell
// that is not pending for its generation, or a table entry that does not exist writes nothing.
TEST(InvokeSend, ForgedCallsAndRepliesAreRejected) {
  auto& rt = test::rt();
  if (rt.size() < 2) GTEST_SKIP() << "needs 2 processes";
  const fabric::thread_id target = rt.options().threads_per_process;  // first thread of rank 1
  struct counts {
    std::uint64_t malformed, bad_reply;
  };
  auto read_counts = [](thread_context& self) {
    return counts{self.rt().counters().rejected_malformed.load(),
                  self.rt().counters().rejected_bad_reply.load()};
  };
  counts before{}, after{};
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != 0) return;
    fabric::return_slot<counts> first;
    ASSERT_EQ(ctx.call_return(target, read_counts, first), call_status::ok);
    ctx.wait_for(first);
    before = first.value();
    transfer::ucx_endpoint& endpoint = ctx.endpoint_to(1);
    auto send = [&](unsigned am_id, const fabric::call_header& h, std::span<const std::byte> data) {
      ucp_request_param_t param{};
      void* request = ucp_am_send_nbx(endpoint.handle(), am_id, &h, sizeof h, data.data(),
                                      data.size(), &param);
      while (request != nullptr && !UCS_PTR_IS_ERR(request) &&
             ucp_request_check_status(request) == UCS_INPROGRESS) {
        (void)ctx.poll();
      }
      ASSERT_FALSE(UCS_PTR_IS_ERR(request));
      if (request != nullptr) ucp_request_free(request);
      // Counted as sent, as a faulty seriema peer would: the receiver counts each as consumed
      // (rejected), and runtime::run ends when the two sums agree.
      rt.counters().sent.fetch_add(1);
    };
    // A well-formed call_return of read_counts, then its forged variants.
    fabric::call_header call{};
    call.function = fabric::function_wrapper<decltype(read_counts), fabric::return_shape>::id;
    call.destination = target;
    call.closure_size = sizeof read_counts;
    call.reply_slot = 1;
    call.reply_generation = 1;
    const std::array<std::byte, sizeof read_counts> closure{};
    fabric::call_header bad = call;
    bad.source = test::rt().attached_id(test::rt().size(), 0) + 5;  // past workers and slots
    send(fabric::am_id_call, bad, closure);
    bad.source = fabric::service_of(rt.size() + 3);  // no such process
    send(fabric::am_id_call, bad, closure);
    std::uint64_t value = 7;
    const auto value_bytes = std::as_bytes(std::span(&value, 1));
    fabric::call_header reply{};
    reply.destination = target;
    reply.source = 0;
    reply.reply_slot = fabric::reply_cell::index_bit | 0x7fff'fff0u;  // far outside the region
    reply.reply_generation = 1;
    send(fabric::am_id_reply, reply, value_bytes);
    reply.reply_slot = fabric::reply_cell::index_bit;  // the target's first cell, not pending
    reply.reply_generation = 0xdead'beefu;
    send(fabric::am_id_reply, reply, value_bytes);
    reply.reply_slot = 0x00ff'ffffu;  // a table entry that was never opened
    send(fabric::am_id_reply, reply, value_bytes);
    // Messages of one endpoint arrive in order: this call runs after the five were handled.
    fabric::return_slot<counts> second;
    ASSERT_EQ(ctx.call_return(target, read_counts, second), call_status::ok);
    ctx.wait_for(second);
    after = second.value();
  });
  if (rt.is_local(0)) {
    EXPECT_EQ(after.malformed - before.malformed, 2u);
    EXPECT_EQ(after.bad_reply - before.bad_reply, 3u);
  }
}

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }
