// Hardware ceiling of the one-sided record pattern, with no seriema code: one thread writes
// records into a ring another thread reads, publishing a word every --flush bytes; the reader
// reads each record's first word. docs/performance.md compares the invoke rates with it.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace {

// Each word on its own cache line: the writer owns `published`, the reader owns `consumed`.
struct alignas(64) shared_word {
  std::atomic<std::uint64_t> value{0};
};

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// Records per second moving `records` records of `record` bytes through a ring of `ring` bytes.
double measure(std::size_t record, std::size_t ring, std::size_t flush, std::uint64_t records) {
  std::vector<std::byte> buffer(ring);
  std::vector<std::byte> payload(record, std::byte{1});
  shared_word published, consumed;
  // Positions are byte offsets that only grow; a record never straddles the ring's end (the
  // writer skips the tail, and the reader skips it the same way).
  const std::uint64_t mask = ring - 1;  // ring is a power of two
  auto place = [ring, record, mask](std::uint64_t position) {
    return (position & mask) + record > ring ? position + (ring - (position & mask)) : position;
  };
  std::uint64_t sink = 0;
  std::thread reader([&] {
    pin_to(1);
    std::uint64_t read = 0, total = 0;
    for (std::uint64_t done = 0; done < records;) {
      const std::uint64_t end = published.value.load(std::memory_order_acquire);
      while (place(read) < end) {  // the writer publishes no more than `records` records
        read = place(read);
        std::uint64_t word;
        std::memcpy(&word, buffer.data() + (read & mask), sizeof word);
        total += word;
        read += record;
        ++done;
      }
      consumed.value.store(read, std::memory_order_release);
    }
    sink = total;
  });
  pin_to(0);
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t written = 0, last_published = 0;
  for (std::uint64_t i = 0; i < records; ++i) {
    written = place(written);
    while (written + record - consumed.value.load(std::memory_order_acquire) > ring) {
    }
    std::memcpy(buffer.data() + (written & mask), payload.data(), record);
    written += record;
    if (written - last_published >= flush) {
      published.value.store(written, std::memory_order_release);
      last_published = written;
    }
  }
  published.value.store(written, std::memory_order_release);
  reader.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (sink == 0 && records > 0) fmt::print(stderr, "ring_ceiling: the reader read nothing\n");
  return static_cast<double>(records) / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ring_ceiling: records/s the hardware moves from one core to another through a "
               "ring, with a published word every --flush bytes (no seriema code)"};
  std::vector<std::size_t> records{32, 88, 280};
  std::size_t ring = std::size_t{4} << 20;
  std::size_t flush = 4096;
  std::uint64_t bytes = std::uint64_t{1} << 30;
  int reps = 3;
  app.add_option("--records", records,
                 "record sizes in bytes (32, 88, 280: the 8/64/256 B closures' records)");
  app.add_option("--ring", ring, "ring bytes, a power of two (default 4 MiB: two 2 MiB chunks)")
      ->check([](const std::string& text) {
        const auto v = std::stoull(text);
        return v >= 4096 && (v & (v - 1)) == 0 ? std::string{} : "a power of two >= 4096";
      });
  app.add_option("--flush", flush, "bytes between published words (4096: trad; one record: write)");
  app.add_option("--bytes", bytes, "bytes moved per repetition");
  app.add_option("--reps", reps, "repetitions (median reported)")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  fmt::print("{:>7} | {:>12} {:>10}\n", "record", "records/s", "GB/s");
  for (std::size_t record : records) {
    if (record < 8 || record > ring) {
      fmt::print(stderr, "ring_ceiling: record size {} must be 8 .. ring\n", record);
      return 2;
    }
    std::vector<double> rates;
    for (int r = 0; r < reps; ++r) rates.push_back(measure(record, ring, flush, bytes / record));
    std::sort(rates.begin(), rates.end());
    const double median = rates[rates.size() / 2];
    fmt::print("{:>7} | {:>11.1f}M {:>10.2f}\n", record, median / 1e6,
               median * static_cast<double>(record) / 1e9);
  }
  return 0;
}
