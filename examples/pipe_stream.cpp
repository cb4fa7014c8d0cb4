// A producer streams variable-size records to a consumer through a remote pipe: it allocates each
// record directly in the consumer's memory (rmalloc), writes it there (rmem), and publishes it
// (rwrite); the consumer reads the records in order (rread), uses them where they lie (rmem), and
// hands the room back (rfree). Workers 2k write to workers 2k + 1; every consumer checks what it
// got against what its producer meant to send.
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./pipe_stream
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <seriema/fabric/runtime.hpp>
#include <seriema/pipe/pipe.hpp>
#include <string>

using namespace seriema;
using fabric::thread_context;

namespace {

constexpr int records = 2000;

// Record i of a producer: a line of 10 .. 4000 bytes.
std::string record(std::uint32_t producer, int i) {
  std::string line = fmt::format("producer {} record {}: ", producer, i);
  line.append(static_cast<std::size_t>(10 + (i * 7919) % 3990), static_cast<char>('a' + i % 26));
  return line;
}

std::uint64_t checksum(const char* data, std::size_t n, std::uint64_t sum) {
  for (std::size_t i = 0; i < n; ++i) sum = sum * 31 + static_cast<unsigned char>(data[i]);
  return sum;
}

void produce(thread_context& me, fabric::thread_id consumer) {
  const auto deadline = fabric::deadline_clock::now() + std::chrono::seconds(60);
  pipe::writer out = pipe::writer::open(me, consumer, {}, deadline);
  for (int i = 0; i < records; ++i) {
    const std::string line = record(me.id(), i);
    // Waits (serving calls) while the consumer still holds the heap.
    pipe::reservation r = out.rmalloc(line.size(), deadline);
    if (!r) throw error(fmt::format("rmalloc: {}", pipe::to_string(r.status)));
    std::memcpy(out.rmem(r.buffer).data(), line.data(), line.size());
    if (pipe::pipe_status st = out.rwrite(r.buffer); st != pipe::pipe_status::ok) {
      throw error(fmt::format("rwrite: {}", pipe::to_string(st)));
    }
  }
  out.close();  // the consumer reads the rest, then sees the end
}

void consume(thread_context& me, fabric::thread_id producer) {
  const auto deadline = fabric::deadline_clock::now() + std::chrono::seconds(60);
  pipe::reader in = pipe::reader::open(me, producer, {}, deadline);
  std::uint64_t sum = 0, expected = 0, bytes = 0;
  int count = 0;
  pipe::read_result got;
  while ((got = in.rread(deadline))) {
    const std::span<std::byte> line = in.rmem(got.buffer);  // in place: no copy
    sum = checksum(reinterpret_cast<const char*>(line.data()), line.size(), sum);
    bytes += line.size();
    const std::string meant = record(producer, count++);
    expected = checksum(meant.data(), meant.size(), expected);
    (void)in.rfree(got.buffer);
  }
  if (got.status != pipe::pipe_status::closed || count != records || sum != expected) {
    fmt::print(stderr, "consumer {}: {} records ({}), checksum {:x} instead of {:x}\n", me.id(),
               count, pipe::to_string(got.status), sum, expected);
    std::exit(1);
  }
  fmt::print("consumer {}: {} records, {} bytes from producer {}, in order and intact ({})\n",
             me.id(), count, bytes, producer, in.counters().buffers == records ? "ok" : "?");
}

}  // namespace

int main() {
  fabric::runtime rt;
  rt.run([](thread_context& me) {
    const fabric::thread_id partner = me.id() ^ 1u;
    if (partner >= me.thread_count()) return;  // an odd worker out
    if (me.id() % 2 == 0) {
      produce(me, partner);
    } else {
      consume(me, partner);
    }
  });
  return 0;
}
