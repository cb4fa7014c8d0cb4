// put/get/atomics/send between processes on RemoteMemoryLocators exchanged through bootstrap;
// run with 2 and 4 processes, over shm and tcp, and with --machines 2 (inter-machine path).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <seriema/transfer/transmitter.hpp>
#include <seriema/fabric/detail/messages.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/ucx.hpp>
#include <string>
#include <thread>

#include "support/mp_main.hpp"
#include "support/published_block.hpp"

using namespace seriema;
using transfer::op_status;
using test::publish_block;

namespace {

constexpr std::size_t slot_bytes = 4096;

std::byte pattern(int writer, std::size_t i) {
  return static_cast<std::byte>((writer * 131 + static_cast<int>(i) * 7 + 1) & 0xff);
}

// Puts per thread in TwoThreadsShareOneTransmitterAcrossProcesses: `usual`, or
// TEST_TRANSFER_PUTS where a variant repeats what another run already does at full volume
// (transfer.cmake lowers it for the 4-process tcp runs, each put being a tcp round trip).
int puts_per_thread_or_environment(int usual) {
  const char* text = std::getenv("TEST_TRANSFER_PUTS");
  return text != nullptr && std::atoi(text) > 0 ? std::atoi(text) : usual;
}

}  // namespace

TEST(TransferMp, LocatorsAreWellFormedAndDirectOnlyOnSameMachine) {
  auto& rt = test::rt();
  auto published = publish_block();
  for (int r = 0; r < rt.size(); ++r) {
    const auto& locator = published.all[static_cast<std::size_t>(r)];
    EXPECT_EQ(locator.process, r);
    EXPECT_EQ(locator.size, transfer::block_size);
    if (r == rt.rank()) continue;
    auto remote = rt.resolve(locator);
    if (!rt.same_machine(r)) {
      EXPECT_EQ(remote.direct(), nullptr) << "rank " << r << " is on another machine";
      const char* isolated = std::getenv("SERIEMA_RUN_ISOLATED");
      if (isolated != nullptr && std::string(isolated) == "yes") {
        // Emulated machines with their own boot ids: UCX must not find shared memory.
        std::string transports = rt.endpoint(r).describe_transports();
        for (const char* shm : {"posix", "sysv", "cma"}) {
          EXPECT_EQ(transports.find(shm), std::string::npos)
              << "rank " << r << " on another machine reached through " << transports;
        }
      }
    } else if (!test::tcp_only()) {
      EXPECT_NE(remote.direct(), nullptr) << "same-machine UCX memory must be directly mapped";
    }
  }
  rt.barrier();
  rt.local_arena().release_block(published.block);
}

TEST(TransferMp, PutIntoEveryPeerThenVerifyAtTarget) {
  auto& rt = test::rt();
  auto published = publish_block();
  std::vector<std::byte> source(slot_bytes);
  for (std::size_t i = 0; i < slot_bytes; ++i) source[i] = pattern(rt.rank(), i);
  for (int r = 0; r < rt.size(); ++r) {
    if (r == rt.rank()) continue;
    transfer::transmitter tx(rt.endpoint(r), transfer::transmitter_options{16, true});
    auto remote = rt.resolve(published.all[static_cast<std::size_t>(r)]);
    // Every rank owns slot `rank` of every peer's block; send it in 64-byte pieces so that the
    // selective-completion path (every 16th op) is exercised many times.
    for (std::size_t off = 0; off < slot_bytes; off += 64) {
      ASSERT_EQ(tx.put(std::span(source).subspan(off, 64), remote,
                       static_cast<std::uint64_t>(rt.rank()) * slot_bytes + off),
                op_status::ok);
    }
    EXPECT_GT(tx.completions_requested(), 0u);
    ASSERT_EQ(tx.flush(), op_status::ok);
    // Out-of-range puts are refused before reaching UCX.
    EXPECT_EQ(tx.put(std::span(source).first(64), remote, transfer::block_size - 32),
              op_status::out_of_range);
  }
  rt.barrier();
  for (int w = 0; w < rt.size(); ++w) {
    if (w == rt.rank()) continue;
    const std::byte* slot = published.block.data + static_cast<std::size_t>(w) * slot_bytes;
    std::size_t bad = 0;
    for (std::size_t i = 0; i < slot_bytes; ++i) bad += slot[i] != pattern(w, i);
    EXPECT_EQ(bad, 0u) << "slot written by rank " << w;
  }
  rt.barrier();
  rt.local_arena().release_block(published.block);
}

TEST(TransferMp, GetReadsWhatTheOwnerWrote) {
  auto& rt = test::rt();
  auto published = publish_block();
  for (std::size_t i = 0; i < slot_bytes; ++i) published.block.data[i] = pattern(rt.rank() + 50, i);
  rt.barrier();
  int peer = (rt.rank() + 1) % rt.size();
  transfer::transmitter tx(rt.endpoint(peer), transfer::transmitter_options{8, true});
  auto remote = rt.resolve(published.all[static_cast<std::size_t>(peer)]);
  std::vector<std::byte> local(slot_bytes);
  transfer::unit_tags tags;
  for (std::size_t off = 0; off < slot_bytes; off += 512) {
    ASSERT_EQ(tx.get(std::span(local).subspan(off, 512), remote, off, &tags), op_status::ok);
  }
  tx.request_completion();
  while (!tags.all_complete()) tx.progress();
  std::size_t bad = 0;
  for (std::size_t i = 0; i < slot_bytes; ++i) bad += local[i] != pattern(peer + 50, i);
  EXPECT_EQ(bad, 0u);
  rt.barrier();
  rt.local_arena().release_block(published.block);
}

TEST(TransferMp, AtomicsFromAllRanksOnRankZero) {
  auto& rt = test::rt();
  auto published = publish_block();
  constexpr int adds_per_rank = 1000;
  auto counters = rt.resolve(published.all[0]);
  transfer::transmitter tx(rt.endpoint(0), transfer::transmitter_options{32, true});
  // word 0: plain adds; word 1: fetch_add tickets; word 2: CAS election
  std::vector<std::uint64_t> fetched(adds_per_rank);
  for (int i = 0; i < adds_per_rank; ++i) ASSERT_EQ(tx.atomic_add(counters, 0, 3), op_status::ok);
  for (int i = 0; i < adds_per_rank; ++i) {
    ASSERT_EQ(tx.fetch_add(counters, 8, 1, &fetched[static_cast<std::size_t>(i)]), op_status::ok);
  }
  std::uint64_t old_value = 99;
  ASSERT_EQ(tx.compare_swap(counters, 16, 0, static_cast<std::uint64_t>(rt.rank()) + 1, &old_value),
            op_status::ok);
  ASSERT_EQ(tx.flush(), op_status::ok);
  EXPECT_EQ(tx.atomic_add(counters, 4, 1), op_status::out_of_range);  // misaligned word
  // fetch_add results from one rank are strictly increasing and distinct.
  for (int i = 1; i < adds_per_rank; ++i) EXPECT_LT(fetched[i - 1], fetched[i]);
  struct result {
    std::uint64_t cas_old;
    std::uint64_t first_ticket;
  };
  auto results = test::allgather_value(result{old_value, fetched[0]});
  rt.barrier();
  if (rt.rank() == 0) {
    auto* words = reinterpret_cast<std::uint64_t*>(published.block.data);
    EXPECT_EQ(words[0], static_cast<std::uint64_t>(rt.size()) * adds_per_rank * 3);
    EXPECT_EQ(words[1], static_cast<std::uint64_t>(rt.size()) * adds_per_rank);
    // Exactly one CAS saw 0 and won; every other saw the winner's value.
    int winners = 0;
    for (const auto& r : results) winners += r.cas_old == 0;
    EXPECT_EQ(winners, 1);
    EXPECT_NE(words[2], 0u);
    for (const auto& r : results) EXPECT_TRUE(r.cas_old == 0 || r.cas_old == words[2]);
  }
  rt.barrier();
  rt.local_arena().release_block(published.block);
}

namespace {
std::atomic<int> messages_received{0};
std::atomic<std::uint64_t> message_checksum{0};

ucs_status_t on_test_message(void*, const void* header, std::size_t header_length, void* data,
                             std::size_t length, const ucp_am_recv_param_t* param) {
  if (header_length != sizeof(int)) return UCS_OK;
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) return UCS_OK;  // not expected here
  int from = 0;
  std::memcpy(&from, header, sizeof from);
  std::uint64_t sum = static_cast<std::uint64_t>(from) * 1000003u;
  for (std::size_t i = 0; i < length; ++i) sum += std::to_integer<unsigned>(static_cast<std::byte*>(data)[i]);
  message_checksum.fetch_add(sum);
  messages_received.fetch_add(1);
  return UCS_OK;
}
}  // namespace

TEST(TransferMp, SendDeliversActiveMessages) {
  auto& rt = test::rt();
  ucp_am_handler_param_t handler{};
  handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB;
  handler.id = fabric::am_id_first_free;
  handler.cb = &on_test_message;
  ASSERT_EQ(ucp_worker_set_am_recv_handler(rt.worker().handle(), &handler), UCS_OK);
  rt.barrier();
  constexpr int messages_per_peer = 200;
  std::vector<std::byte> payload(100);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i);
  int me = rt.rank();
  for (int r = 0; r < rt.size(); ++r) {
    if (r == me) continue;
    transfer::transmitter tx(rt.endpoint(r), {});
    for (int i = 0; i < messages_per_peer; ++i) {
      ASSERT_EQ(tx.send(fabric::am_id_first_free, std::as_bytes(std::span(&me, 1)), payload),
                op_status::ok);
    }
    ASSERT_EQ(tx.flush(), op_status::ok);
  }
  rt.barrier();
  std::uint64_t payload_sum = 0;
  for (auto b : payload) payload_sum += std::to_integer<unsigned>(b);
  std::uint64_t expected = 0;
  for (int r = 0; r < rt.size(); ++r) {
    if (r != me) expected += messages_per_peer * (static_cast<std::uint64_t>(r) * 1000003u + payload_sum);
  }
  EXPECT_EQ(messages_received.load(), messages_per_peer * (rt.size() - 1));
  EXPECT_EQ(message_checksum.load(), expected);
  rt.barrier();
}

TEST(TransferMp, TwoThreadsShareOneTransmitterAcrossProcesses) {
  auto& rt = test::rt();
  auto published = publish_block();
  int peer = (rt.rank() + 1) % rt.size();
  if (rt.size() > 1) {
    transfer::transmitter tx(rt.endpoint(peer), transfer::transmitter_options{32, true});
    auto remote = rt.resolve(published.all[static_cast<std::size_t>(peer)]);
    const int puts_per_thread = puts_per_thread_or_environment(20000);
    std::atomic<int> errors{0};
    // `value` is reused right after each put, so each thread waits for its own put's tag: the
    // tag read after posting is covered by the ticket the thread claims next.
    auto checked = [&](int t) {
      std::uint64_t value = 0;
      for (int i = 0; i < puts_per_thread; ++i) {
        value = (static_cast<std::uint64_t>(t) << 32) | static_cast<std::uint64_t>(i);
        if (tx.put(std::as_bytes(std::span(&value, 1)), remote, 64 + 8 * static_cast<std::uint64_t>(t)) !=
            op_status::ok) {
          errors.fetch_add(1);
        }
        auto tag = tx.current_tag();
        tx.request_completion();
        if (tx.wait(tag) != op_status::ok) errors.fetch_add(1);
      }
    };
    std::thread a(checked, 0), b(checked, 1);
    a.join();
    b.join();
    EXPECT_EQ(errors.load(), 0);
    ASSERT_EQ(tx.flush(), op_status::ok);
  }
  rt.barrier();
  if (rt.size() > 1) {
    // The previous rank's threads each put into their own word; the last put of each landed.
    const auto last = static_cast<std::uint64_t>(puts_per_thread_or_environment(20000) - 1);
    auto* words = reinterpret_cast<std::uint64_t*>(published.block.data + 64);
    EXPECT_EQ(words[0], (0ull << 32) | last);
    EXPECT_EQ(words[1], (1ull << 32) | last);
  }
  rt.barrier();
  rt.local_arena().release_block(published.block);
}

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }
