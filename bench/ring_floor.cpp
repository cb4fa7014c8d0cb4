// ring_floor: how many records of 8, 64 or 256 bytes one core can hand another on this machine
// through a hand-written shared ring with no call machinery at all: the reference for
// invoke_rate's shm write/trad columns (what the cores move without the library, measured in
// the same run, though not at the same moment: the VM's spells can fall between them), and
// the context for "trad >= 3 x MPI batched" at 8 B. A writer thread stores each record in
// 8-byte words (its first word a sequence number) and publishes the ring's end every
// --publish-bytes with a release store, like a trad flush (--publish-bytes 8: after every
// record, as a write-mode call publishes itself); a reader thread reads the first word
// of every record it sees published and hands its position back, which the writer waits on
// when the ring is full. The two threads are pinned to the first two CPUs this process may use
// (where seriema-run puts the two ranks). bench/run-paper.sh runs it in the same run as
// invoke_rate:
//   ring_floor --json bench/results/ring_floor-shm.json
// --extra-stores N (1 or 2) adds N 8-byte stores per record to a word of the writer's own (like
// a messenger's write offset, or a closure built on the stack before it is copied): what one
// more store-buffer entry per record costs the same ring (docs/performance.md, issue 24).
// --copy writes each record as a call writes its closure: the record is built on the stack
// (its first word stored there) and copied into the ring by the messenger's own copy
// (invoke::detail::copy_in_pieces), instead of stored from a register.
#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdint>
#include <memory>
#include <seriema/invoke/detail/messenger.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"

using namespace seriema::bench;

namespace {

struct options {
  std::vector<std::size_t> sizes{8, 64, 256};
  std::size_t ring_bytes = std::size_t{4} << 20;  // two 2 MiB chunks, as a messenger's first ring
  std::size_t publish_bytes = 4096;               // SERIEMA_FLUSH_SIZE's default
  int reps = 5;
  int extra_stores = 0;
  bool copy = false;
  double seconds = 0.25;
  std::string json;
};

// The shared state: the writer owns `published`, the reader `consumed`; each on its own line.
struct ring_state {
  explicit ring_state(std::size_t bytes) : words(bytes / 8), ring(new std::uint64_t[bytes / 8]()) {}
  std::size_t words;
  std::unique_ptr<std::uint64_t[]> ring;
  alignas(64) std::atomic<std::uint64_t> published{0};  // bytes written and published
  alignas(64) std::atomic<std::uint64_t> consumed{0};   // bytes read
  alignas(64) std::uint64_t checksum = 0;                // the reader's sum of sequence numbers
};

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
    throw std::runtime_error(fmt::format("ring_floor: cannot pin a thread to CPU {}", cpu));
  }
}

// The writer's own words for --extra-stores (atomic, so that no store is left out; relaxed, so
// that each is a plain store), on lines the reader never touches.
struct alignas(128) writer_words {
  std::atomic<std::uint64_t> word[2];
};
writer_words extra_words;

// Hands `records` records of `Words` 8-byte words (0: `size` bytes, known at run time only) from
// a thread on cpus[0] to one on cpus[1]; returns the seconds from the first store to the
// reader's last read. Positions wrap by comparison, not by division (the ring's size is a
// multiple of every record size).
template <std::size_t Words, int Extra, bool Copy>
double hand_over(const options& opt, std::size_t size, std::uint64_t records,
                 const std::vector<int>& cpus) {
  ring_state state(opt.ring_bytes);
  const std::size_t record_words = Words != 0 ? Words : size / 8;
  const std::uint64_t total = records * size;
  std::uint64_t* const ring = state.ring.get();
  std::thread reader([&] {
    pin_to(cpus[1]);
    std::uint64_t read = 0, sum = 0;
    std::size_t at = 0;
    while (read < total) {
      const std::uint64_t end = state.published.load(std::memory_order_acquire);
      for (; read < end; read += size) {
        sum += ring[at];
        at += record_words;
        if (at == state.words) at = 0;
      }
      state.consumed.store(read, std::memory_order_release);
    }
    state.checksum = sum;
  });
  pin_to(cpus[0]);
  alignas(16) std::uint64_t source[Words != 0 ? Words : 1] = {};
  const auto start = clock_type::now();
  std::uint64_t written = 0, last_published = 0, room_until = opt.ring_bytes;
  std::size_t at = 0;
  for (std::uint64_t i = 0; i < records; ++i) {
    if (written + size > room_until) {
      // Full: wait for the reader.
      while (written + size > state.consumed.load(std::memory_order_acquire) + opt.ring_bytes) {
      }
      room_until = state.consumed.load(std::memory_order_relaxed) + opt.ring_bytes;
    }
    if constexpr (Copy && Words != 0) {
      // The record's first word changes, as a closure's captures do; the rest stays on the stack.
      std::atomic_ref<std::uint64_t>(source[0]).store(i, std::memory_order_relaxed);
      seriema::invoke::detail::copy_in_pieces<8>(reinterpret_cast<std::byte*>(ring + at),
                                                  reinterpret_cast<const std::byte*>(source),
                                                  Words * 8);
    } else {
      for (std::size_t w = 0; w < record_words; ++w) ring[at + w] = i;
    }
    for (int e = 0; e < Extra; ++e) extra_words.word[e].store(i, std::memory_order_relaxed);
    at += record_words;
    if (at == state.words) at = 0;
    written += size;
    if (written - last_published >= opt.publish_bytes) {
      state.published.store(written, std::memory_order_release);
      last_published = written;
    }
  }
  state.published.store(written, std::memory_order_release);
  reader.join();
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  if (state.checksum != records * (records - 1) / 2) {
    throw std::runtime_error(fmt::format("ring_floor: the reader saw wrong records at {} B", size));
  }
  return seconds;
}

template <int Extra, bool Copy>
double hand_over_sized(const options& opt, std::size_t size, std::uint64_t records,
                       const std::vector<int>& cpus) {
  switch (size) {
    case 8:
      return hand_over<1, Extra, Copy>(opt, size, records, cpus);
    case 64:
      return hand_over<8, Extra, Copy>(opt, size, records, cpus);
    case 256:
      return hand_over<32, Extra, Copy>(opt, size, records, cpus);
    default:
      return hand_over<0, Extra, Copy>(opt, size, records, cpus);
  }
}

template <bool Copy>
double hand_over_copying(const options& opt, std::size_t size, std::uint64_t records,
                         const std::vector<int>& cpus) {
  switch (opt.extra_stores) {
    case 1:
      return hand_over_sized<1, Copy>(opt, size, records, cpus);
    case 2:
      return hand_over_sized<2, Copy>(opt, size, records, cpus);
    default:
      return hand_over_sized<0, Copy>(opt, size, records, cpus);
  }
}

double hand_over_any(const options& opt, std::size_t size, std::uint64_t records,
                     const std::vector<int>& cpus) {
  return opt.copy ? hand_over_copying<true>(opt, size, records, cpus)
                  : hand_over_copying<false>(opt, size, records, cpus);
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  CLI::App app{"ring_floor: records/s through a hand-written shared ring between two cores"};
  app.add_option("--sizes", opt.sizes, "record sizes in bytes, multiples of 8 (8, 64, 256)")
      ->check(CLI::Range(std::size_t{8}, std::size_t{4096}));
  app.add_option("--ring-bytes", opt.ring_bytes, "bytes of the ring (4 MiB)");
  app.add_option("--publish-bytes", opt.publish_bytes,
                 "bytes between publishes (4096; 8: after every record, as write mode publishes "
                 "every call)");
  app.add_option("--reps", opt.reps, "timed repetitions per size (median reported)")
      ->check(CLI::Range(1, 100));
  app.add_option("--seconds", opt.seconds, "target duration of one repetition");
  app.add_option("--extra-stores", opt.extra_stores,
                 "8-byte stores per record to a word of the writer's own (0; 1 or 2: what a "
                 "store-buffer entry per record costs)")
      ->check(CLI::Range(0, 2));
  app.add_flag("--copy", opt.copy,
               "copy each record from the stack in 16-byte pieces, as a call copies its closure "
               "(8, 64 and 256 B)");
  app.add_option("--json", opt.json, "write results here");
  CLI11_PARSE(app, argc, argv);
  for (std::size_t size : opt.sizes) {
    if (opt.copy && size != 8 && size != 64 && size != 256) {
      fmt::print(stderr, "ring_floor: --copy is built for 8, 64 and 256 B records, not {}\n",
                 size);
      return 2;
    }
    if (size % 8 != 0 || opt.ring_bytes % size != 0) {
      fmt::print(stderr, "ring_floor: --sizes {}: must be a multiple of 8 dividing --ring-bytes\n",
                 size);
      return 2;
    }
  }
  cpu_set_t allowed;
  sched_getaffinity(0, sizeof allowed, &allowed);
  const std::vector<int> cpus = cpus_of(allowed);
  if (cpus.size() < 2) {
    fmt::print(stderr, "ring_floor: needs two CPUs, this process may use {}\n", cpus.size());
    return 2;
  }

  const machine_info machine = machine_info::here();
  fmt::print("# ring_floor: one core hands records to another through a shared ring (CPUs {} "
             "and {}), published every {} B, ring {} KiB, {} extra stores per record{}\n{}\n",
             cpus[0], cpus[1], opt.publish_bytes, opt.ring_bytes >> 10, opt.extra_stores,
             opt.copy ? ", records copied from the stack" : "", machine.line());
  report_json points = report_json::array();
  for (std::size_t size : opt.sizes) {
    // Calibrate the count to about --seconds per repetition.
    const std::uint64_t probe = 2'000'000;
    const double probe_seconds = hand_over_any(opt, size, probe, cpus);
    const auto records = static_cast<std::uint64_t>(
        std::max(1.0, opt.seconds / probe_seconds) * static_cast<double>(probe));
    std::vector<double> rates, seconds;
    for (int r = 0; r < opt.reps; ++r) {
      seconds.push_back(hand_over_any(opt, size, records, cpus));
      rates.push_back(static_cast<double>(records) / seconds.back());
    }
    const double rate = median(rates);
    fmt::print("[ring] {:5} B: {:.2f}M records/s ({:.2f} GB/s), median of {}\n", size, rate / 1e6,
               rate * static_cast<double>(size) / 1e9, opt.reps);
    points.push_back({{"size", size},
                      {"records", records},
                      {"records_per_s", rounded(rate, 1)},
                      {"seconds", rounded_array(seconds, 6)}});
  }
  if (!opt.json.empty()) {
    write_report(opt.json, {{"benchmark", "ring_floor"},
                            {"date", utc_now()},
                            {"machine", machine.json()},
                            {"cpus", {cpus[0], cpus[1]}},
                            {"ring_bytes", opt.ring_bytes},
                            {"publish_bytes", opt.publish_bytes},
                            {"extra_stores", opt.extra_stores},
                            {"copy", opt.copy},
                            {"repetitions", opt.reps},
                            {"points", points}});
  }
  return 0;
}
