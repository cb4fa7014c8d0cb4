// mpi_rma_pipe: the seed's baseline of rpipe (seed 001): MPI-3 passive-target RMA, a write being
// MPI_Put of the data + MPI_Win_flush + MPI_Put of a flag + MPI_Win_flush, and the reader polling
// the flag in its own window (MPI_Win_sync, with MPI_Iprobe for progress). Rank 0 and rank 1
// ping-pong: one-way latency (median of round trips / 2) at 8 B .. 64 KiB, and streaming 64 KiB
// writes into a ring of 16 slots as large as a pipe's heap, each slot's flag answered by the reader.
//   mpirun -np 2 --mca btl self,vader mpi_rma_pipe --json bench/results/mpi_rma_pipe-shm.json
// (bench/run-pipes.sh runs it over vader and tcp beside bench/pipe_rate.)
#include <fmt/format.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "json_report.hpp"
#include "mpi_cli.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
constexpr std::size_t max_size = 64 * 1024;
constexpr std::size_t slots = 16;
// Window: [slots x max_size data][slots flags of 8 B][the stream's acknowledgement][ping flag]
constexpr std::size_t flags_at = slots * max_size;
constexpr std::size_t ack_at = flags_at + slots * 8;
constexpr std::size_t ping_at = ack_at + 8;
constexpr std::size_t window_bytes = ping_at + 8;

struct options {
  std::string transport = "shm";
  std::vector<std::size_t> sizes = {8, 64, 256, 1024, 4096, 16384, 65536};
  int reps = 5;
  std::uint64_t round_trips = 2000;
  std::uint64_t stream_buffers = 2000;
  std::string json;
};

struct rma {
  MPI_Win win{};
  std::byte* base = nullptr;
  int peer = 0;

  // The writer's part: data, flush, flag, flush (the seed's baseline).
  void write(const std::byte* data, std::size_t size, std::size_t slot, std::size_t flag_at,
             std::uint64_t flag) {
    MPI_Put(data, int(size), MPI_BYTE, peer, MPI_Aint(slot * max_size), int(size), MPI_BYTE, win);
    MPI_Win_flush(peer, win);
    put_word(flag_at, flag);
  }
  void put_word(std::size_t at, std::uint64_t value) {
    MPI_Put(&value, 1, MPI_UINT64_T, peer, MPI_Aint(at), 1, MPI_UINT64_T, win);
    MPI_Win_flush(peer, win);
  }
  // Polls the word at `at` of our own window until it reaches `value`.
  void wait_word(std::size_t at, std::uint64_t value) {
    auto* word = reinterpret_cast<std::uint64_t*>(base + at);
    for (;;) {
      MPI_Win_sync(win);
      if (std::atomic_ref<std::uint64_t>(*word).load(std::memory_order_acquire) >= value) return;
      int flag = 0;
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    }
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One-way µs of `n` ping-pongs of `size` bytes (rank 0 times them); `flag` counts on.
std::vector<double> ping_pong(rma& r, int rank, std::size_t size, std::uint64_t n,
                              std::uint64_t& flag, const std::vector<std::byte>& payload) {
  std::vector<double> one_way;
  for (std::uint64_t i = 0; i < n; ++i) {
    ++flag;
    if (rank == 0) {
      const auto start = clock_type::now();
      r.write(payload.data(), size, 0, ping_at, flag);
      r.wait_word(ping_at, flag);
      one_way.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start)
                            .count() / 2);
    } else {
      r.wait_word(ping_at, flag);
      r.write(r.base, size, 0, ping_at, flag);  // echo what arrived
    }
  }
  return one_way;
}

// MiB/s of `n` 64 KiB writes from rank 0 into the ring of rank 1, which acknowledges each.
double stream(rma& r, int rank, std::uint64_t n, std::uint64_t& round,
              const std::vector<std::byte>& payload) {
  const std::uint64_t base_flag = ++round * n;  // flags of this stream are above the last one's
  const auto start = clock_type::now();
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::size_t slot = i % slots;
    if (rank == 0) {
      if (i >= slots) r.wait_word(ack_at, base_flag + i - slots + 1);  // the slot was read
      r.write(payload.data(), max_size, slot, flags_at + slot * 8, base_flag + i + 1);
    } else {
      r.wait_word(flags_at + slot * 8, base_flag + i + 1);
      r.put_word(ack_at, base_flag + i + 1);
    }
  }
  if (rank == 0) r.wait_word(ack_at, base_flag + n);
  const double us = std::chrono::duration<double, std::micro>(clock_type::now() - start).count();
  return double(n * max_size) / us * 1e6 / (1 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  options opt;
  CLI::App app{"mpi_rma_pipe: MPI-3 passive-target RMA as rpipe's baseline"};
  app.add_option("--transport", opt.transport, "label for the output");
  app.add_option("--sizes", opt.sizes, "sizes (bytes)")->delimiter(',');
  app.add_option("--reps", opt.reps, "repetitions");
  app.add_option("--round-trips", opt.round_trips, "ping-pongs per size and repetition");
  app.add_option("--stream-buffers", opt.stream_buffers, "64 KiB writes per repetition");
  app.add_option("--json", opt.json, "write results here (rank 0)");
  if (const auto code = seriema::bench::parse_or_finalize(app, argc, argv)) return *code;
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fmt::print(stderr, "mpi_rma_pipe: needs 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  rma r;
  r.peer = 1 - rank;
  MPI_Win_allocate(MPI_Aint(window_bytes), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &r.base, &r.win);
  std::memset(r.base, 0, window_bytes);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_lock_all(0, r.win);
  const std::vector<std::byte> payload(max_size, std::byte{7});
  std::vector<std::vector<double>> latency(opt.sizes.size());
  std::vector<double> stream_mib;
  std::uint64_t flag = 0, round = 1000;
  for (int rep = -1; rep < opt.reps; ++rep) {
    for (std::size_t s = 0; s < opt.sizes.size(); ++s) {
      auto v = ping_pong(r, rank, opt.sizes[s], rep < 0 ? 100 : opt.round_trips, flag, payload);
      if (rep >= 0) latency[s].insert(latency[s].end(), v.begin(), v.end());
    }
    const double mib = stream(r, rank, rep < 0 ? 50 : opt.stream_buffers, round, payload);
    if (rep >= 0) stream_mib.push_back(mib);
  }
  MPI_Win_unlock_all(r.win);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_free(&r.win);
  if (rank == 0) {
    using seriema::bench::rounded;
    seriema::bench::report_json lat = seriema::bench::report_json::array();
    fmt::print("# mpi_rma_pipe [{}]: MPI_Put + MPI_Win_flush + flag put; {} repetitions\n",
               opt.transport, opt.reps);
    fmt::print("{:>8} {:>12}\n", "bytes", "one-way us");
    for (std::size_t s = 0; s < opt.sizes.size(); ++s) {
      const double us = median(latency[s]);
      fmt::print("{:>8} {:>12.3f}\n", opt.sizes[s], us);
      lat.push_back({{"bytes", opt.sizes[s]}, {"one_way_us", rounded(us, 4)}});
    }
    const double mib = median(stream_mib);
    fmt::print("streaming 64 KiB: {:.0f} MiB/s\n", mib);
    if (!opt.json.empty()) {
      seriema::bench::write_report(
          opt.json, {{"benchmark", "mpi_rma_pipe"},
                     {"transport", opt.transport},
                     {"repetitions", opt.reps},
                     {"latency", lat},
                     {"streaming_64k_mib_s", rounded(mib, 1)}});
    }
  }
  MPI_Finalize();
  return 0;
}
