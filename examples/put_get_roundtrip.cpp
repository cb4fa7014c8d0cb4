// Demo: two processes, rank 0 puts a message into memory rank 1 allocated, reads it back with a
// get, checks it, and reports round trips per second and the one-sided put rate.
//   seriema-run -n 2 -- ./put_get_roundtrip
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <seriema/fabric/runtime.hpp>
#include <seriema/transfer/transmitter.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/ucx.hpp>

using namespace seriema;
using clock_type = std::chrono::steady_clock;

int main() try {
  fabric::runtime rt;
  if (rt.size() != 2) {
    fmt::print(stderr, "put_get_roundtrip: run me with two processes: seriema-run -n 2 -- {}\n",
               "put_get_roundtrip");
    return 2;
  }
  // Each rank takes a registered 2 MiB block from its NUMA zone's arena and publishes it.
  transfer::memory_block block = rt.local_arena().allocate_block();
  auto mine = transfer::remote_memory_locator::make(rt.rank(), *block.segment, block.data, block.size);
  auto all = rt.allgather(std::as_bytes(std::span(&mine, 1)));
  transfer::remote_memory_locator theirs;
  std::memcpy(&theirs, all[static_cast<std::size_t>(1 - rt.rank())].data(), sizeof theirs);

  if (rt.rank() == 0) {
    transfer::transmitter tx(rt.endpoint(1), transfer::transmitter_options::from_environment());
    auto remote = rt.resolve(theirs);
    fmt::print("rank 0 on machine {}, rank 1 on machine {}; transports: {}\n", rt.machine(),
               rt.machine_of(1), rt.endpoint(1).describe_transports());
    fmt::print("rank 1's block: {} ({})\n", theirs.to_string(),
               remote.direct() ? "directly mapped: same machine, shared memory"
                               : "reached by put/get");

    // Round trips: put 64 bytes, get them back, compare.
    constexpr int round_trips = 20000;
    char out[64], back[64];
    auto start = clock_type::now();
    for (int i = 0; i < round_trips; ++i) {
      std::snprintf(out, sizeof out, "hello from rank 0, round trip %d", i);
      if (tx.put(std::as_bytes(std::span(out)), remote, 0) != transfer::op_status::ok ||
          tx.flush() != transfer::op_status::ok ||
          tx.get(std::as_writable_bytes(std::span(back)), remote, 0) != transfer::op_status::ok ||
          tx.flush() != transfer::op_status::ok || std::memcmp(out, back, sizeof out) != 0) {
        fmt::print(stderr, "round trip {} failed\n", i);
        return 1;
      }
    }
    double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
    fmt::print("{} put+get round trips of 64 B verified: {:.0f} round trips/s ({:.2f} us each)\n",
               round_trips, round_trips / seconds, seconds / round_trips * 1e6);

    // Streaming puts with automatic selective completion.
    constexpr std::size_t message = 4096;
    constexpr int messages = 100000;
    std::memset(block.data, 0x5a, message);
    start = clock_type::now();
    for (int i = 0; i < messages; ++i) {
      std::uint64_t offset = (static_cast<std::uint64_t>(i) * message) % (theirs.size - message);
      if (tx.put(std::span(block.data, message), remote, offset) != transfer::op_status::ok) {
        fmt::print(stderr, "put {} failed\n", i);
        return 1;
      }
    }
    if (tx.flush() != transfer::op_status::ok) return 1;
    seconds = std::chrono::duration<double>(clock_type::now() - start).count();
    fmt::print("{} puts of {} B: {:.0f} puts/s, {:.1f} MB/s\n", messages, message,
               messages / seconds, messages * static_cast<double>(message) / seconds / 1e6);
    std::snprintf(out, sizeof out, "done");
    if (tx.put(std::as_bytes(std::span(out)), remote, 0) != transfer::op_status::ok ||
        tx.flush() != transfer::op_status::ok) {
      return 1;
    }
  }
  rt.barrier();  // rank 1 progresses here while rank 0 works (needed over TCP)
  if (rt.rank() == 1) {
    fmt::print("rank 1: last message in my block: \"{}\"\n", reinterpret_cast<const char*>(block.data));
  }
  rt.local_arena().release_block(block);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "put_get_roundtrip: {}\n", e.what());
  return 1;
}
