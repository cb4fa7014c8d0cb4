// mpi_rate: the MPI baseline of invoke_rate. Rank 0 sends small messages (8/64/256 B) to rank 1
// with windows of MPI_Isend / MPI_Irecv, and, in a second mode, packs them into 4 KiB messages
// (application-level batching, as one would by hand); rank 1 reads every record. Reports
// records/s (the median of repetitions).
//   mpirun -np 2 --mca pml ob1 --mca btl self,vader mpi_rate --json bench/results/mpi_rate-shm.json
// (bench/run-paper.sh runs it over vader (shared memory) and tcp.)
#include <fmt/format.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "json_report.hpp"
#include "mpi_cli.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

struct options {
  std::string transport = "shm";
  std::vector<std::size_t> sizes{8, 64, 256};
  int window = 64;
  std::size_t batch_bytes = 4096;
  int reps = 3;
  double seconds = 0.25;
  std::string json;
};

std::uint64_t sink = 0;  // rank 1: what it read, so no read is elided

// Serializes `count` records of `size` bytes at `at`, numbered from `first`: every byte of each
// record is written, as a call copies all of its closure (a record is its number and zeros).
// The sizes invoke_rate measures are copied with their size known at compile time, as a call's.
template <std::size_t Size>
void serialize_records(std::byte* at, std::size_t count, std::uint64_t first) {
  std::uint64_t source[Size / 8] = {};
  for (std::size_t r = 0; r < count; ++r) {
    source[0] = first + r;
    std::memcpy(at + r * Size, source, Size);
  }
}

void serialize_records(std::byte* at, std::size_t size, std::size_t count, std::uint64_t first,
                       std::vector<std::byte>& source) {
  switch (size) {
    case 8:
      return serialize_records<8>(at, count, first);
    case 64:
      return serialize_records<64>(at, count, first);
    case 256:
      return serialize_records<256>(at, count, first);
    default:
      source.resize(size);
      for (std::size_t r = 0; r < count; ++r) {
        const std::uint64_t number = first + r;
        std::memcpy(source.data(), &number, sizeof number);
        std::memcpy(at + r * size, source.data(), size);
      }
  }
}

// One timed phase: `records` records of `size` bytes, `per_message` of them per MPI message.
// Returns the seconds on rank 0 from the first send to rank 1's acknowledgement.
double phase(int rank, std::size_t size, std::size_t per_message, std::uint64_t records,
             int window, std::vector<std::byte>& buffers) {
  const std::size_t message = size * per_message;
  const std::uint64_t messages = (records + per_message - 1) / per_message;
  std::vector<MPI_Request> requests(static_cast<std::size_t>(window));
  std::vector<std::byte> source;  // a record of a size without its own copy
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = clock_type::now();
  std::uint64_t record = 0;
  for (std::uint64_t sent = 0; sent < messages;) {
    const int burst = static_cast<int>(std::min<std::uint64_t>(window, messages - sent));
    for (int i = 0; i < burst; ++i) {
      std::byte* b = buffers.data() + static_cast<std::size_t>(i) * message;
      if (rank == 0) {
        // Serialize the records into the message (what an application batching by hand does).
        serialize_records(b, size, per_message, record, source);
        record += per_message;
        MPI_Isend(b, static_cast<int>(message), MPI_BYTE, 1, 0, MPI_COMM_WORLD,
                  &requests[static_cast<std::size_t>(i)]);
      } else {
        MPI_Irecv(b, static_cast<int>(message), MPI_BYTE, 0, 0, MPI_COMM_WORLD,
                  &requests[static_cast<std::size_t>(i)]);
      }
    }
    MPI_Waitall(burst, requests.data(), MPI_STATUSES_IGNORE);
    if (rank == 1) {
      for (int i = 0; i < burst; ++i) {
        const std::byte* b = buffers.data() + static_cast<std::size_t>(i) * message;
        for (std::size_t r = 0; r < per_message; ++r) {
          std::uint64_t v;
          std::memcpy(&v, b + r * size, sizeof v);
          sink += v;
        }
      }
    }
    sent += static_cast<std::uint64_t>(burst);
  }
  char ack = 0;
  if (rank == 1) {
    MPI_Send(&ack, 1, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
  } else {
    MPI_Recv(&ack, 1, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  options opt;
  CLI::App app{"mpi_rate: records/s of small MPI messages, unbatched and packed into 4 KiB"};
  app.add_option("--transport", opt.transport, "label for the output (shm, tcp)");
  app.add_option("--sizes", opt.sizes, "record sizes in bytes (>= 8)")->delimiter(',');
  app.add_option("--window", opt.window, "messages in flight per window")->check(CLI::Range(1, 4096));
  app.add_option("--batch-bytes", opt.batch_bytes, "bytes per batched message");
  app.add_option("--reps", opt.reps, "repetitions (median)")->check(CLI::Range(1, 100));
  app.add_option("--seconds", opt.seconds, "target duration of one repetition");
  app.add_option("--json", opt.json, "write results here (rank 0)");
  if (const auto code = seriema::bench::parse_or_finalize(app, argc, argv)) return *code;
  if (size != 2) {
    if (rank == 0) fmt::print(stderr, "mpi_rate: needs exactly 2 ranks (mpirun -np 2)\n");
    MPI_Finalize();
    return 2;
  }
  struct result {
    std::size_t size;
    std::string mode;
    std::uint64_t records;
    double rate;
  };
  std::vector<result> results;
  for (std::size_t s : opt.sizes) {
    if (s < 8 || s > opt.batch_bytes) {
      if (rank == 0) fmt::print(stderr, "mpi_rate: size {} out of 8..{}\n", s, opt.batch_bytes);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (const bool batched : {false, true}) {
      const std::size_t per_message = batched ? opt.batch_bytes / s : 1;
      std::vector<std::byte> buffers(static_cast<std::size_t>(opt.window) * s * per_message);
      // Calibrate on rank 0's clock: double until a pilot takes 20 ms; share N.
      std::uint64_t records = 4096;
      for (;;) {
        double t = phase(rank, s, per_message, records, opt.window, buffers);
        MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (t >= 0.02 || records >= (std::uint64_t{1} << 30)) {
          records = static_cast<std::uint64_t>(opt.seconds * static_cast<double>(records) / t);
          break;
        }
        records *= 2;
      }
      MPI_Bcast(&records, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
      records = std::max<std::uint64_t>(records, 10000);
      std::vector<double> rates;
      for (int r = 0; r < opt.reps; ++r) {
        const double t = phase(rank, s, per_message, records, opt.window, buffers);
        rates.push_back(static_cast<double>(records) / t);
      }
      results.push_back({s, batched ? "batched" : "unbatched", records, median(rates)});
    }
  }
  if (rank == 0) {
    fmt::print("# mpi_rate [{}]: records/s, window {} messages, batches of {} B; median of {}\n",
               opt.transport, opt.window, opt.batch_bytes, opt.reps);
    fmt::print("{:>5} | {:>12} {:>12}\n", "size", "unbatched/s", "batched/s");
    for (std::size_t i = 0; i + 1 < results.size(); i += 2) {
      fmt::print("{:>5} | {:>11.2f}M {:>11.2f}M\n", results[i].size, results[i].rate / 1e6,
                 results[i + 1].rate / 1e6);
    }
    if (!opt.json.empty()) {
      seriema::bench::report_json points = seriema::bench::report_json::array();
      for (const result& r : results) {
        points.push_back({{"mode", r.mode},
                          {"size", r.size},
                          {"records", r.records},
                          {"records_per_s", seriema::bench::rounded(r.rate, 1)}});
      }
      seriema::bench::write_report(opt.json, {{"benchmark", "mpi_rate"},
                                              {"transport", opt.transport},
                                              {"window", opt.window},
                                              {"batch_bytes", opt.batch_bytes},
                                              {"repetitions", opt.reps},
                                              {"points", points}});
      fmt::print("\nwrote {}\n", opt.json);
    }
  }
  MPI_Finalize();
  return sink == 42 ? 3 : 0;  // (never: keeps rank 1's reads)
}
