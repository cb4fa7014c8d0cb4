// huge_pages: random 8-byte puts (ucp_put through a transmitter) and direct stores (through the
// ucp_rkey_ptr mapping) into a large remote arena segment on 2 MiB hugetlb pages, against the
// same on 4 KiB pages, alternating in one run; medians and the ratio. Two ranks on one machine
// (rank 0 writes, rank 1 owns the segments); bench/run-huge-pages.sh reserves the pages.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstring>
#include <seriema/fabric/runtime.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/transmitter.hpp>

#include "bench_support.hpp"

namespace {

using namespace seriema;
using namespace seriema::bench;

struct options {
  std::size_t arena_mib = 1024;
  std::uint64_t puts = 1'000'000;
  int reps = 5;
  std::string json;
};

// What rank 1 publishes: both segments and the pages each obtained.
struct published_segments {
  transfer::remote_memory_locator huge, small;
  std::size_t huge_page_size = 0, small_page_size = 0;
};

// Offsets in [0, bytes), 8-byte aligned, from a xorshift sequence (the same for every run).
struct random_offsets {
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  std::uint64_t mask;
  explicit random_offsets(std::size_t bytes) : mask((bytes - 1) & ~std::uint64_t{7}) {}
  std::uint64_t next() noexcept {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state & mask;
  }
};

// Rank 1's segments, through the bootstrap (rank 0 contributes an empty value).
published_segments exchange(fabric::runtime& rt, const published_segments& mine) {
  auto blobs = rt.allgather(std::as_bytes(std::span(&mine, 1)));
  published_segments theirs;
  if (blobs.size() < 2 || blobs[1].size() != sizeof theirs) {
    throw error("huge_pages: rank 1 published no segments");
  }
  std::memcpy(&theirs, blobs[1].data(), sizeof theirs);
  return theirs;
}

double timed_puts(fabric::runtime& rt, const transfer::remote_memory& remote, std::size_t bytes,
                  std::uint64_t puts) {
  transfer::transmitter tx(rt.endpoint(1), transfer::transmitter_options{64, true});
  random_offsets offsets(bytes);
  std::uint64_t value = 1;
  const auto start = clock_type::now();
  for (std::uint64_t i = 0; i < puts; ++i) {
    ++value;
    if (tx.put(std::as_bytes(std::span(&value, 1)), remote, offsets.next()) !=
        transfer::op_status::ok) {
      throw error("huge_pages: a put failed");
    }
  }
  if (tx.flush() != transfer::op_status::ok) throw error("huge_pages: flush failed");
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

double timed_stores(std::byte* mapped, std::size_t bytes, std::uint64_t stores) {
  random_offsets offsets(bytes);
  const auto start = clock_type::now();
  for (std::uint64_t i = 0; i < stores; ++i) {
    std::uint64_t value = i;
    std::memcpy(mapped + offsets.next(), &value, sizeof value);
  }
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

// Rank 1: one segment of each page kind, touched, published; waits while rank 0 measures.
void own_segments(fabric::runtime& rt, const options& opt) {
  transfer::arena_options huge{transfer::memory_source::ucx, transfer::page_preference::hugetlb_2m,
                               opt.arena_mib << 20, 0};
  transfer::arena_options small = huge;
  small.pages = transfer::page_preference::normal;
  transfer::context_options small_context_options = rt.options().ucx;
  small_context_options.pages = transfer::page_preference::normal;  // UCX hugetlb off
  transfer::ucx_context small_context(small_context_options);
  transfer::arena huge_arena(rt.context(), -1, huge), small_arena(small_context, -1, small);
  const auto& h = huge_arena.grow();
  const auto& s = small_arena.grow();
  std::memset(h.base, 0, h.size);  // first touch outside the timing
  std::memset(s.base, 0, s.size);
  published_segments mine{transfer::remote_memory_locator::make(1, h, h.base, h.size),
                          transfer::remote_memory_locator::make(1, s, s.base, s.size),
                          h.page_size, s.page_size};
  (void)exchange(rt, mine);
  rt.barrier();  // rank 0 measures meanwhile (the barrier progresses this rank's worker)
}

struct medians {
  double put_rate, store_rate;
};

// Rank 0: alternates huge and small each repetition (after one untimed pass of each, which maps
// the pages into this process); returns the medians per kind.
std::pair<medians, medians> measure(fabric::runtime& rt, const options& opt,
                                    const published_segments& segments, report_json& samples) {
  transfer::remote_memory huge = rt.resolve(segments.huge), small = rt.resolve(segments.small);
  if (huge.direct() == nullptr || small.direct() == nullptr) {
    throw error("huge_pages: rank 1's segments are not directly mapped (use shm, one machine)");
  }
  const std::size_t bytes = opt.arena_mib << 20;
  std::vector<double> puts[2], stores[2];
  const transfer::remote_memory* targets[2] = {&huge, &small};
  for (int rep = -1; rep < opt.reps; ++rep) {
    for (int kind = 0; kind < 2; ++kind) {
      const double put_s = timed_puts(rt, *targets[kind], bytes, opt.puts);
      const double store_s = timed_stores(targets[kind]->direct(), bytes, opt.puts * 10);
      if (rep < 0) continue;
      puts[kind].push_back(static_cast<double>(opt.puts) / put_s);
      stores[kind].push_back(static_cast<double>(opt.puts * 10) / store_s);
    }
  }
  for (int kind = 0; kind < 2; ++kind) {
    samples.push_back({{"pages", kind == 0 ? "2 MiB hugetlb" : "4 KiB"},
                       {"puts_per_s", rounded_array(puts[kind], 0)},
                       {"stores_per_s", rounded_array(stores[kind], 0)}});
  }
  return {{median(puts[0]), median(stores[0])}, {median(puts[1]), median(stores[1])}};
}

void report(const options& opt, const published_segments& segments, const medians& huge,
            const medians& small, report_json samples) {
  const machine_info machine = machine_info::here();
  fmt::print("# huge_pages: random 8-byte writes into a {} MiB remote arena segment (rank 1), "
             "median of {}\n{}\n",
             opt.arena_mib, opt.reps, machine.line());
  fmt::print("{:<16} {:>14} {:>16}\n", "pages", "puts/s", "direct stores/s");
  fmt::print("{:<16} {:>14.0f} {:>16.0f}\n", "2 MiB hugetlb", huge.put_rate, huge.store_rate);
  fmt::print("{:<16} {:>14.0f} {:>16.0f}\n", "4 KiB", small.put_rate, small.store_rate);
  fmt::print("{:<16} {:>14.2f} {:>16.2f}\n", "ratio 2M/4K", huge.put_rate / small.put_rate,
             huge.store_rate / small.store_rate);
  if (opt.json.empty()) return;
  write_report(opt.json, {{"benchmark", "huge_pages"},
                          {"date", utc_now()},
                          {"machine", machine.json()},
                          {"arena_mib", opt.arena_mib},
                          {"puts", opt.puts},
                          {"repetitions", opt.reps},
                          {"page_size", {segments.huge_page_size, segments.small_page_size}},
                          {"median_puts_per_s",
                           {rounded(huge.put_rate, 0), rounded(small.put_rate, 0)}},
                          {"median_stores_per_s",
                           {rounded(huge.store_rate, 0), rounded(small.store_rate, 0)}},
                          {"ratio_puts", rounded(huge.put_rate / small.put_rate, 3)},
                          {"ratio_stores", rounded(huge.store_rate / small.store_rate, 3)},
                          {"samples", std::move(samples)}});
}

int run(const options& opt) {
  fabric::runtime rt;
  if (rt.size() != 2 || !rt.same_machine(1)) {
    throw error("huge_pages: run it as 2 ranks on one machine (seriema-run -n 2)");
  }
  if (rt.rank() == 1) {
    own_segments(rt, opt);
  } else {
    const published_segments segments = exchange(rt, published_segments{});
    if (segments.huge_page_size != (std::size_t{2} << 20) || segments.small_page_size != 4096) {
      throw error(fmt::format("huge_pages: rank 1 got pages of {} and {} bytes, not 2 MiB and "
                              "4 KiB (reserve 2 MiB pages: bench/run-huge-pages.sh)",
                              segments.huge_page_size, segments.small_page_size));
    }
    report_json samples = report_json::array();
    const auto [huge, small] = measure(rt, opt, segments, samples);
    report(opt, segments, huge, small, std::move(samples));
    rt.barrier();
  }
  rt.finalize();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  CLI::App app{"huge_pages: random puts into a remote arena on 2 MiB vs 4 KiB pages"};
  app.add_option("--arena-mib", opt.arena_mib, "MiB of each remote segment (1024)")
      ->check(CLI::Range(std::size_t{2}, std::size_t{16384}));
  app.add_option("--puts", opt.puts, "puts per repetition (direct stores: 10x)");
  app.add_option("--reps", opt.reps, "timed repetitions (median reported)")
      ->check(CLI::Range(1, 100));
  app.add_option("--json", opt.json, "write results here");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(opt);
  } catch (const std::exception& e) {
    fmt::print(stderr, "huge_pages: {}\n", e.what());
    return 1;
  }
}
