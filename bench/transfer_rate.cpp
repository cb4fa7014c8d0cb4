// transfer_rate (paper §5.1, Fig. 2): messages/s of one-sided puts against message size for raw
// UCX, the transmitter with manual and with automatic selective completion, and ucx_perftest
// ucp_put_bw measured in the same run as the baseline. Rank 0 sends, rank 1 is the target.
//   seriema-run -n 2 -- transfer_rate --transport shm --json bench/results/transfer_rate-shm.json
// (bench/run-transfer-rate.sh runs the shm and the tcp case and draws the plot.)
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <seriema/fabric/runtime.hpp>
#include <seriema/transfer/allocators.hpp>
#include <seriema/transfer/transmitter.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/ucx.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"

using namespace seriema;

using namespace seriema::bench;

namespace {

constexpr const char* mode_names[] = {"raw", "manual", "auto"};
// Rank 1's block: puts go round a window at its start (at most half of it); the last cache line
// holds the flag rank 0 writes to end a timed phase.
constexpr std::size_t flag_offset = seriema::transfer::block_size - 64;
constexpr int mode_count = 3;

struct options {
  std::string transport;  // label: "shm", "tcp" (default: guessed from the endpoint)
  std::vector<std::size_t> sizes;
  std::size_t min_size = 8;
  std::size_t max_size = 65536;
  int reps = 3;
  double seconds = 0.3;     // target duration of one timed point
  std::uint64_t iters = 0;  // fixed N per point; 0 = calibrate to `seconds`
  std::uint64_t max_iters = 10'000'000;
  std::uint64_t max_bytes = std::uint64_t{16} << 30;  // per point, caps N at large sizes
  std::uint32_t interval = 0;  // S; 0 = SERIEMA_COMPLETION_INTERVAL (default 64)
  // The same in-flight budget for every mode, in puts: clamp(inflight_bytes / unit, 2 S,
  // inflight_puts), unit = size rounded up to 64 B. auto: the circular allocator's ring has that
  // many units (a unit is reused only once its put completed); raw and manual: at most
  // budget / S completion requests outstanding. (ucx_perftest is bounded only by the transport.)
  std::size_t inflight_bytes = 16 << 20;
  std::size_t inflight_puts = 4096;
  std::size_t window = 256 << 10;  // target window (power of two; at least the message size)
  std::string touch = "full";      // full | last-byte
  std::string perftest = "ucx_perftest";
  bool no_perftest = false;
  bool verbose = false;          // print UCX's full endpoint configuration
  std::string perftest_tls;      // UCX_TLS for perftest; default: ours, tcp,self across machines
  double perftest_timeout = 25;  // seconds per ucx_perftest run (bootstrap timeout is 30 s)
  double target = 0.9;           // reported, never asserted: auto >= target x perftest
  std::string json;
};

// ---- the three modes --------------------------------------------------------------------------

// The in-flight budget at `size` (see options): a multiple of S, at least 2 S.
std::size_t budget_puts(const options& opt, std::size_t size) {
  const std::size_t unit = (size + 63) / 64 * 64;
  const std::size_t s = opt.interval;
  std::size_t puts =
      std::clamp<std::size_t>(opt.inflight_bytes / unit, 2 * s, std::max(opt.inflight_puts, 2 * s));
  return puts / s * s;
}

struct target_window {
  const transfer::remote_memory* remote;
  std::uint64_t mask;  // window size - 1 (a power of two, >= every message size)
  bool fill = true;    // fill the whole message before its put; false: only its last byte
};

// What a sender does to a message before it posts it: write it (all of it by default; the last
// byte only with --touch last-byte: no more than ucx_perftest writes, at most a sequence number).
inline void touch(std::byte* message, std::size_t size, std::uint64_t i, const target_window& w) {
  if (w.fill) {
    std::memset(message, static_cast<int>(i & 0xff), size);
  } else {
    message[size - 1] = static_cast<std::byte>(i & 0xff);
  }
}

[[noreturn]] void die(const std::string& what) {
  fmt::print(stderr, "transfer_rate: {}\n", what);
  std::fflush(stderr);
  std::_Exit(1);
}

struct raw_flush_state {
  std::atomic<int> outstanding{0};
};

void on_raw_flush(void* request, ucs_status_t status, void* user_data) {
  if (status != UCS_OK) die(fmt::format("raw: flush failed: {}", ucs_status_string(status)));
  static_cast<raw_flush_state*>(user_data)->outstanding.fetch_sub(1, std::memory_order_relaxed);
  ucp_request_free(request);
}

// 1. raw: ucp_put_nbx with the unpacked rkey, put requests released at once, a flush every S
// operations with at most `inflight` flushes outstanding, and a final flush waited for.
double run_raw(transfer::ucx_endpoint& endpoint, std::byte* source, std::size_t size,
               std::uint64_t n, std::uint32_t interval, std::uint32_t inflight,
               const target_window& w) {
  ucp_ep_h ep = endpoint.handle();
  ucp_worker_h worker = endpoint.worker().handle();
  ucp_rkey_h rkey = w.remote->rkey();
  const std::uint64_t base = w.remote->address();
  raw_flush_state state;
  ucp_request_param_t put_param{};
  ucp_request_param_t flush_param{};
  flush_param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  flush_param.cb.send = &on_raw_flush;
  flush_param.user_data = &state;

  auto start = clock_type::now();
  std::uint32_t since_flush = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    touch(source, size, i, w);
    void* request = ucp_put_nbx(ep, source, size, base + ((i * size) & w.mask), rkey, &put_param);
    if (UCS_PTR_IS_PTR(request)) {
      ucp_request_free(request);
    } else if (UCS_PTR_IS_ERR(request)) {
      die(fmt::format("raw: ucp_put_nbx: {}", ucs_status_string(UCS_PTR_STATUS(request))));
    }
    if (++since_flush == interval) {
      since_flush = 0;
      void* flush = ucp_ep_flush_nbx(ep, &flush_param);
      if (UCS_PTR_IS_ERR(flush)) die("raw: ucp_ep_flush_nbx failed");
      if (flush != nullptr) {
        state.outstanding.fetch_add(1, std::memory_order_relaxed);
        while (state.outstanding.load(std::memory_order_relaxed) > static_cast<int>(inflight)) {
          ucp_worker_progress(worker);
        }
      }
    }
  }
  ucp_request_param_t final_param{};
  if (transfer::wait_request(endpoint.worker(), ucp_ep_flush_nbx(ep, &final_param)) != UCS_OK) {
    die("raw: final flush failed");
  }
  auto end = clock_type::now();
  while (state.outstanding.load(std::memory_order_relaxed) > 0) ucp_worker_progress(worker);
  return std::chrono::duration<double>(end - start).count();
}

// 2. manual: transmitter with automatic=false; request_completion() every S puts, at most
// `inflight` completion requests outstanding; one fixed registered source buffer.
double run_manual(transfer::transmitter& tx, std::byte* source, std::size_t size, std::uint64_t n,
                  std::uint32_t interval, std::uint32_t inflight, const target_window& w) {
  auto start = clock_type::now();
  std::uint32_t since_request = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    touch(source, size, i, w);
    if (tx.put(std::span<const std::byte>(source, size), *w.remote, (i * size) & w.mask) !=
        transfer::op_status::ok) {
      die(fmt::format("manual: put failed: {}",
                      ucs_status_string(static_cast<ucs_status_t>(tx.last_error()))));
    }
    if (++since_request == interval) {
      since_request = 0;
      tx.request_completion();
      std::uint64_t claimed = tx.completions_requested();
      if (claimed > inflight) {
        transfer::completion_tag oldest{&tx.counter(), claimed - 1 - inflight};
        while (!oldest.is_complete()) tx.progress();
      }
    }
  }
  if (tx.flush() != transfer::op_status::ok) die("manual: flush failed");
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

// 3. auto: transmitter in automatic mode; each message's source is a fresh unit of a circular
// allocator, filled before the put; when no unit is free, progress until one is.
double run_auto(transfer::transmitter& tx, transfer::circular_allocator& units, std::size_t size,
                std::uint64_t n, const target_window& w) {
  auto start = clock_type::now();
  for (std::uint64_t i = 0; i < n; ++i) {
    transfer::registered_buffer unit = units.allocate();
    if (!unit) {
      // Ring exhausted: completions arrive through progress. The oldest unit's ticket is claimed
      // within S puts of it, so a ring of at least S units only waits; a smaller ring (large
      // messages, --auto-ring-bytes) asks for the completion itself when progress goes idle.
      std::uint32_t idle = 0;
      do {
        if (tx.progress()) {
          idle = 0;
        } else if (++idle % 1024 == 8) {
          tx.request_completion();
        }
        unit = units.allocate();
      } while (!unit);
    }
    touch(unit.data, size, i, w);
    if (tx.put(unit, size, *w.remote, (i * size) & w.mask) != transfer::op_status::ok) {
      die(fmt::format("auto: put failed: {}",
                      ucs_status_string(static_cast<ucs_status_t>(tx.last_error()))));
    }
  }
  if (tx.flush() != transfer::op_status::ok) die("auto: flush failed");
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

// ---- output -----------------------------------------------------------------------------------

struct point {
  std::size_t size = 0;
  std::uint64_t iters = 0;
  std::size_t ring_units = 0;  // the in-flight budget: auto's ring units; raw/manual S x requests
  std::vector<double> seconds[mode_count];
  std::vector<perftest_result> perftest;

  double rate(int mode) const {  // median msgs/s
    std::vector<double> r;
    for (double s : seconds[mode]) r.push_back(static_cast<double>(iters) / s);
    return median(r);
  }
  std::optional<double> perftest_rate() const {
    std::vector<double> r;
    for (auto& p : perftest) {
      if (p.ok) r.push_back(p.msgs_per_s);
    }
    if (r.empty()) return std::nullopt;
    return median(r);
  }
};

double mib(double msgs_per_s, std::size_t size) {
  return msgs_per_s * static_cast<double>(size) / (1024.0 * 1024.0);
}

std::string rate_text(double msgs_per_s) {
  if (msgs_per_s >= 1e6) return fmt::format("{:.2f}M", msgs_per_s / 1e6);
  return fmt::format("{:.1f}k", msgs_per_s / 1e3);
}

std::string ratio_text(std::optional<double> r) {
  return r ? fmt::format("{:.2f}", *r) : "-";
}

// msgs/s and MiB/s of a mode (or ucx_perftest) at `size`, and each repetition's msgs/s.
report_json rate_json(double msgs_per_s, std::size_t size, const std::vector<double>& reps) {
  return {{"msgs_per_s", rounded(msgs_per_s, 1)},
          {"mib_per_s", rounded(mib(msgs_per_s, size), 2)},
          {"reps_msgs_per_s", rounded_array(reps, 1)}};
}

// One size of the report's "points": each mode's rate, ucx_perftest's, and the ratios to it
// (perftest, ratios and meets_target null when ucx_perftest did not run).
report_json point_json(const point& p, double target) {
  report_json out = {{"size", p.size}, {"iters", p.iters}, {"inflight_puts", p.ring_units}};
  for (int mode = 0; mode < mode_count; ++mode) {
    std::vector<double> reps;
    for (double s : p.seconds[mode]) reps.push_back(static_cast<double>(p.iters) / s);
    out[mode_names[mode]] = rate_json(p.rate(mode), p.size, reps);
  }
  const auto pt = p.perftest_rate();
  if (!pt) {
    out["perftest"] = nullptr;
    out["ratios"] = nullptr;
    out["meets_target"] = nullptr;
    return out;
  }
  std::vector<double> reps;
  for (const auto& run : p.perftest) {
    if (run.ok) reps.push_back(run.msgs_per_s);
  }
  out["perftest"] = rate_json(*pt, p.size, reps);
  out["ratios"] = {{"raw", rounded(p.rate(0) / *pt, 4)},
                   {"manual", rounded(p.rate(1) / *pt, 4)},
                   {"auto", rounded(p.rate(2) / *pt, 4)}};
  out["meets_target"] = p.rate(2) / *pt >= target;
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  // Before the runtime binds us and edits the environment: what ucx_perftest should inherit.
  const launch_state launch = launch_state::capture();
  const cpu_set_t& launch_cpus = launch.cpus;
  const std::vector<std::string>& pristine_environment = launch.environment;

  options opt;
  CLI::App app{
      "transfer_rate: puts/s vs message size (paper Fig. 2): raw UCX, transmitter "
      "manual and automatic, and ucx_perftest ucp_put_bw in the same run"};
  app.add_option("--transport", opt.transport, "label for the output (shm, tcp); default: guessed");
  app.add_option("--sizes", opt.sizes, "message sizes (default: powers of two, min..max)")
      ->delimiter(',');
  app.add_option("--min-size", opt.min_size, "smallest size (power of two)");
  app.add_option("--max-size", opt.max_size, "largest size (power of two, <= 1 MiB)");
  app.add_option("--reps", opt.reps, "timed repetitions per point (median reported)")
      ->check(CLI::Range(1, 100));
  app.add_option("--seconds", opt.seconds, "target duration of one point when calibrating N");
  app.add_option("--iters", opt.iters, "fixed N puts per point (0: calibrate to --seconds)");
  app.add_option("--max-iters", opt.max_iters, "cap on the calibrated N");
  app.add_option("--max-bytes", opt.max_bytes, "cap on N * size per point");
  app.add_option("--interval", opt.interval,
                 "S, puts per completion request (0: SERIEMA_COMPLETION_INTERVAL)");
  app.add_option("--window", opt.window, "target window in bytes (power of two, <= 1 MiB)");
  app.add_option("--inflight-bytes", opt.inflight_bytes,
                 "in-flight budget in bytes (auto: ring size)")
      ->check(CLI::PositiveNumber);
  app.add_option("--inflight-puts", opt.inflight_puts,
                 "in-flight budget cap in puts (auto: ring units)")
      ->check(CLI::PositiveNumber);
  app.add_option("--touch", opt.touch,
                 "what the sender writes per message: full (memset) or last-byte (<= what "
                 "ucx_perftest writes)")
      ->check(CLI::IsMember({"full", "last-byte"}));
  app.add_option("--perftest", opt.perftest, "ucx_perftest binary");
  app.add_flag("--verbose", opt.verbose, "print UCX's endpoint configuration (lanes, thresholds)");
  app.add_flag("--no-perftest", opt.no_perftest, "skip the ucx_perftest baseline");
  app.add_option("--perftest-tls", opt.perftest_tls,
                 "UCX_TLS for ucx_perftest (default: ours; tcp,self across machines)");
  app.add_option("--perftest-timeout", opt.perftest_timeout,
                 "seconds per ucx_perftest run (< bootstrap timeout)");
  app.add_option("--target", opt.target, "reported target: auto >= TARGET x perftest");
  app.add_option("--json", opt.json, "write results here (rank 0)");
  CLI11_PARSE(app, argc, argv);

  if (opt.sizes.empty()) {
    for (std::size_t s = opt.min_size; s <= opt.max_size; s *= 2) opt.sizes.push_back(s);
  }
  // The target region is one 2 MiB block of rank 1; puts go round a window at its start.
  const std::size_t window = opt.window;
  if (window == 0 || (window & (window - 1)) != 0 || window > transfer::block_size / 2) {
    throw error(
        fmt::format("--window {}: need a power of two up to {}", window, transfer::block_size / 2));
  }
  for (std::size_t s : opt.sizes) {
    if (s == 0 || (s & (s - 1)) != 0 || s > transfer::block_size / 2) {
      throw error(fmt::format("--sizes: {} is not a power of two between 1 and {}", s,
                              transfer::block_size / 2));
    }
  }

  fabric::runtime rt;
  if (rt.size() != 2) {
    fmt::print(stderr,
               "transfer_rate: needs exactly two processes: seriema-run -n 2 -- transfer_rate\n");
    return 2;
  }
  if (opt.interval == 0)
    opt.interval = transfer::transmitter_options::from_environment().completion_interval;

  // Each rank's CPUs after the runtime bound it: perftest's server runs where rank 1 runs, its
  // client where rank 0 runs.
  cpu_set_t my_cpus;
  CPU_ZERO(&my_cpus);
  sched_getaffinity(0, sizeof my_cpus, &my_cpus);
  auto cpu_sets = rt.allgather(std::as_bytes(std::span(&my_cpus, 1)));
  // Sender and target sharing a core would measure the scheduler, not the transport: refuse.
  {
    cpu_set_t other;
    std::memcpy(&other, cpu_sets[static_cast<std::size_t>(1 - rt.rank())].data(), sizeof other);
    cpu_set_t overlap;
    CPU_AND(&overlap, &my_cpus, &other);
    if (CPU_COUNT(&overlap) > 0 && CPU_COUNT(&my_cpus) == 1) {
      throw error("rank 0 and rank 1 are pinned to the same CPU; check SERIEMA_BIND and the "
                  "placement (seriema-info --shape 1x2x1)");
    }
  }

  // Rank 1: the target block, published; then it only progresses (while rank 0 sends) or
  // blocks in the bootstrap (while rank 0 runs ucx_perftest).
  transfer::memory_block target = rt.local_arena().allocate_block();
  if (target.data == nullptr) throw error("arena exhausted: cannot allocate the target block");
  *reinterpret_cast<std::uint64_t*>(target.data + flag_offset) = 0;
  auto locator =
      transfer::remote_memory_locator::make(rt.rank(), *target.segment, target.data, target.size);
  auto locators = rt.allgather(std::as_bytes(std::span(&locator, 1)));

  if (rt.rank() == 1) {
    // While rank 0 sends we spin on the worker, as ucx_perftest's responder does in one-sided
    // tests (over TCP the target applies the puts and acknowledges them), until rank 0 puts the
    // phase's epoch into the flag word at the end of our block. (rt.barrier() would do, but it
    // naps 50 us when idle, which slows TCP completions during calibration.)
    std::atomic_ref<std::uint64_t> flag(
        *reinterpret_cast<std::uint64_t*>(target.data + flag_offset));
    std::uint64_t epoch = 0;
    transfer::ucx_endpoint& to_sender = rt.endpoint(0);
    auto serve = [&] {
      ++epoch;
      for (std::uint32_t spins = 1; flag.load(std::memory_order_acquire) < epoch; ++spins) {
        rt.worker().progress();
        if (spins % 65536 == 0 && to_sender.failed()) throw error("rank 0 failed");
      }
    };
    serve();  // rank 0 warms up (first touch of the window, UCX's lazy setup)
    for (std::size_t k = 0; k < opt.sizes.size(); ++k) {
      serve();  // rank 0 calibrates and warms up
      for (int r = 0; r < opt.reps; ++r) {
        serve();           // rank 0 times the three modes
        rt.allgather({});  // rank 0 runs ucx_perftest; we sleep in the bootstrap, off the CPUs
      }
    }
    rt.barrier();
    rt.local_arena().release_block(target);
    return 0;
  }

  // ---- rank 0 ----
  transfer::remote_memory_locator theirs;
  std::memcpy(&theirs, locators[1].data(), sizeof theirs);
  // The sender posts from a private single-thread worker, as hand-written UCX code (and
  // ucx_perftest) would: the runtime's process worker is shared by threads and takes a lock on
  // every operation. All three modes use this endpoint.
  transfer::ucx_worker sender_worker(rt.context(), transfer::worker_sharing::single_thread);
  transfer::ucx_endpoint sender_endpoint(sender_worker, rt.worker_address(1), "rank 1");
  transfer::remote_memory remote(sender_endpoint, theirs, rt.same_machine(1));
  cpu_set_t rank1_cpus;
  std::memcpy(&rank1_cpus, cpu_sets[1].data(), sizeof rank1_cpus);
  auto cpus0 = cpus_of(my_cpus), cpus1 = cpus_of(rank1_cpus);

  const bool same_machine = rt.same_machine(1);
  const char* our_tls_env = std::getenv("UCX_TLS");
  const std::string our_tls = our_tls_env ? our_tls_env : "";
  if (opt.transport.empty()) {
    opt.transport = same_machine && our_tls.find("tcp") == std::string::npos ? "shm" : "tcp";
  }
  std::string perftest_tls = opt.perftest_tls;
  std::string perftest_note;
  if (perftest_tls.empty()) {
    perftest_tls = our_tls;
    if (!same_machine && our_tls.empty()) {
      perftest_tls = "tcp,self";
      perftest_note =
          "ranks on different emulated machines: ucx_perftest forced to UCX_TLS=tcp,self";
    }
  }
  bool pinned = cpus0.size() == 1 && cpus1.size() == 1 && cpus0 != cpus1;
  std::optional<perftest_runner> perftest;
  std::string perftest_binary = opt.no_perftest ? "" : find_in_path(opt.perftest);
  if (!opt.no_perftest && perftest_binary.empty()) {
    fmt::print(stderr, "transfer_rate: {} not found: no baseline, ratios left empty\n",
               opt.perftest);
  }
  if (!perftest_binary.empty()) {
    perftest.emplace(perftest_binary, pristine_environment, perftest_tls,
                     pinned ? my_cpus : launch_cpus, pinned ? rank1_cpus : launch_cpus,
                     opt.perftest_timeout);
  }

  utsname un{};
  uname(&un);
  const std::string host = un.nodename, kernel = un.release;
  const std::string cpu_model = read_first_match("/proc/cpuinfo", "model name");
  const long nproc = sysconf(_SC_NPROCESSORS_ONLN);
  const std::string ucx_version = transfer::ucx_version();
  const std::string lanes = sender_endpoint.describe_transports();
  const std::string date = utc_now();
  const std::string load_before = load_average();

  fmt::print("# transfer_rate [{}]: {} -> rank 1 ({}), lanes: {}\n", opt.transport,
             same_machine ? "same machine" : "another emulated machine",
             remote.direct() ? "mappable" : "put path", lanes);
  fmt::print("# machine: {} | {} | {} CPUs | Linux {} | UCX {} | {} | load {}\n", host, cpu_model,
             nproc, kernel, ucx_version, date, load_before);
  fmt::print(
      "# UCX_TLS={} (ours), {} (ucx_perftest, over 127.0.0.1){}; rank0 CPUs {}, rank1 CPUs {}{}\n",
      our_tls.empty() ? "(unset)" : our_tls, perftest_tls.empty() ? "(unset)" : perftest_tls,
      perftest_note.empty() ? "" : " -- " + perftest_note, join_cpus(cpus0), join_cpus(cpus1),
      pinned ? "; perftest client/server pinned the same way" : "");
  fmt::print(
      "# S={} puts per completion request; in flight: {} KiB in {}..{} puts (auto: ring units; "
      "raw/manual: budget/S requests); window {} KiB; sender writes {} of each message; {} reps, "
      "median\n",
      opt.interval, opt.inflight_bytes / 1024, budget_puts(opt, std::size_t{1} << 30),
      budget_puts(opt, 1), window / 1024, opt.touch == "full" ? "all" : "the last byte", opt.reps);
  if (opt.verbose) ucp_ep_print_info(sender_endpoint.handle(), stdout);
  std::fflush(stdout);

  transfer::memory_block source_block = rt.local_arena().allocate_block();
  if (source_block.data == nullptr)
    throw error("arena exhausted: cannot allocate the source block");
  std::byte* source = source_block.data;

  transfer::transmitter_options manual_options{opt.interval, false};
  transfer::transmitter_options auto_options{opt.interval, true};
  transfer::transmitter tx_manual(sender_endpoint, manual_options);
  transfer::transmitter tx_auto(sender_endpoint, auto_options);

  std::uint64_t epoch = 0;
  auto release_target = [&] {  // ends rank 1's current progress phase
    const std::uint64_t value = ++epoch;
    if (tx_manual.put(std::as_bytes(std::span(&value, 1)), remote, flag_offset) !=
            transfer::op_status::ok ||
        tx_manual.flush() != transfer::op_status::ok) {
      die("cannot signal rank 1");
    }
  };

  // Warm-up: touch the usable half of the target block (pages, mappings), then about 0.1 s of puts
  // at the first size, so the first point is not measured cold.
  {
    const target_window whole{&remote, transfer::block_size / 2 - 1};
    const std::uint32_t k = static_cast<std::uint32_t>(budget_puts(opt, 4096) / opt.interval);
    (void)run_raw(sender_endpoint, source, 4096, 2 * transfer::block_size / 4096, opt.interval, k, whole);
    const target_window first{&remote, std::max(window, opt.sizes.front()) - 1};
    for (std::uint64_t n = 1024;; n *= 2) {
      const std::uint32_t k1 =
          static_cast<std::uint32_t>(budget_puts(opt, opt.sizes.front()) / opt.interval);
      if (run_raw(sender_endpoint, source, opt.sizes.front(), n, opt.interval, k1, first) > 0.05) break;
    }
  }
  release_target();

  std::vector<point> points;
  for (std::size_t size : opt.sizes) {
    point p;
    p.size = size;
    const target_window w{&remote, std::max(window, size) - 1, opt.touch == "full"};
    transfer::circular_allocator_config config;
    config.unit_size =
        (size + transfer::min_alignment - 1) / transfer::min_alignment * transfer::min_alignment;
    const std::size_t ring_units = budget_puts(opt, size);
    const auto inflight = static_cast<std::uint32_t>(ring_units / opt.interval);
    p.ring_units = ring_units;
    config.max_units = ring_units;
    config.initial_units = ring_units;
    config.max_bytes = std::max<std::size_t>(config.max_bytes, ring_units * config.unit_size);
    transfer::circular_allocator units(rt.local_arena(), config);

    auto run_mode = [&](int mode, std::uint64_t n) {
      switch (mode) {
        case 0:
          return run_raw(sender_endpoint, source, size, n, opt.interval, inflight, w);
        case 1:
          return run_manual(tx_manual, source, size, n, opt.interval, inflight, w);
        default:
          return run_auto(tx_auto, units, size, n, w);
      }
    };

    // Calibrate N on raw: double until a pilot takes 20 ms, then take the fastest of three
    // pilots at that count (a pilot that lost its CPU to another process would make N tiny).
    std::uint64_t n = opt.iters;
    const std::uint64_t cap =
        std::max<std::uint64_t>(1000, std::min<std::uint64_t>(opt.max_iters, opt.max_bytes / size));
    if (n == 0) {
      std::uint64_t pilot = 256;
      double t = run_mode(0, pilot);
      while (t < 0.02 && pilot < cap) {
        pilot *= 2;
        t = run_mode(0, pilot);
      }
      for (int again = 0; again < 2; ++again) t = std::min(t, run_mode(0, pilot));
      n = std::clamp<std::uint64_t>(static_cast<std::uint64_t>(opt.seconds * pilot / t), 1000, cap);
    }
    p.iters = n;
    const std::uint64_t warmup = std::clamp<std::uint64_t>(n / 10, 100, 10000);
    for (int mode = 0; mode < mode_count; ++mode) (void)run_mode(mode, warmup);
    release_target();

    for (int r = 0; r < opt.reps; ++r) {
      for (int mode = 0; mode < mode_count; ++mode) p.seconds[mode].push_back(run_mode(mode, n));
      release_target();
      if (perftest) {
        p.perftest.push_back(perftest->run(size, n, warmup));
        if (!p.perftest.back().ok) {
          fmt::print(stderr, "transfer_rate: ucx_perftest at {} B: {}\n", size,
                     p.perftest.back().error);
        }
      }
      rt.allgather({});
    }
    fmt::print(stderr, "[{}] {:>6} B: N={} raw {} manual {} auto {} perftest {}\n", opt.transport,
               size, n, rate_text(p.rate(0)), rate_text(p.rate(1)), rate_text(p.rate(2)),
               p.perftest_rate() ? rate_text(*p.perftest_rate()) : "-");
    points.push_back(std::move(p));
  }
  rt.barrier();

  // ---- table ----
  fmt::print(
      "\n{:>6} {:>9} | {:>8} {:>8} | {:>8} {:>8} | {:>8} {:>8} | {:>8} {:>8} | {:>7} {:>7} {:>7}\n",
      "size", "N", "raw/s", "MiB/s", "manual/s", "MiB/s", "auto/s", "MiB/s", "perftest", "MiB/s",
      "auto/pt", "man/pt", "raw/pt");
  std::vector<std::size_t> met, missed;
  for (const point& p : points) {
    auto pt = p.perftest_rate();
    auto ratio = [&](int mode) -> std::optional<double> {
      if (!pt) return std::nullopt;
      return p.rate(mode) / *pt;
    };
    fmt::print(
        "{:>6} {:>9} | {:>8} {:>8.1f} | {:>8} {:>8.1f} | {:>8} {:>8.1f} | {:>8} {:>8} | {:>7} "
        "{:>7} {:>7}\n",
        p.size, p.iters, rate_text(p.rate(0)), mib(p.rate(0), p.size), rate_text(p.rate(1)),
        mib(p.rate(1), p.size), rate_text(p.rate(2)), mib(p.rate(2), p.size),
        pt ? rate_text(*pt) : "-", pt ? fmt::format("{:.1f}", mib(*pt, p.size)) : "-",
        ratio_text(ratio(2)), ratio_text(ratio(1)), ratio_text(ratio(0)));
    if (pt) (ratio(2).value() >= opt.target ? met : missed).push_back(p.size);
  }
  auto list = [](const std::vector<std::size_t>& v) {
    std::string s;
    for (auto x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
    return s.empty() ? "none" : s;
  };
  fmt::print("\ntarget auto >= {:.2f} x ucx_perftest [{}]: met at {}; missed at {}\n", opt.target,
             opt.transport, list(met), list(missed));

  // ---- JSON ----
  if (!opt.json.empty()) {
    report_json json_points = report_json::array();
    for (const point& p : points) json_points.push_back(point_json(p, opt.target));
    write_report(
        opt.json,
        {{"benchmark", "transfer_rate"},
         {"figure", "paper Fig. 2"},
         {"transport", opt.transport},
         {"date", date},
         {"machine",
          {{"hostname", host}, {"cpu_model", cpu_model}, {"nproc", nproc}, {"kernel", kernel}}},
         {"load_average", {{"start", load_before}, {"end", load_average()}}},
         {"ucx_version", ucx_version},
         {"ucx_tls", our_tls},
         {"perftest_tls", perftest_tls},
         {"perftest_note", perftest_note},
         {"lanes", lanes},
         {"same_machine", same_machine},
         {"binding", {{"rank0_cpus", join_cpus(cpus0)},
                      {"rank1_cpus", join_cpus(cpus1)},
                      {"perftest_pinned_like_ranks", pinned}}},
         {"parameters", {{"reps", opt.reps},
                         {"seconds_per_point", opt.seconds},
                         {"completion_interval", opt.interval},
                         {"inflight_bytes", opt.inflight_bytes},
                         {"inflight_puts_max", opt.inflight_puts},
                         {"window_bytes", window},
                         {"touch", opt.touch},
                         {"target", opt.target}}},
         {"units", {{"rate", "messages/s"}, {"bandwidth", "MiB/s (2^20 B/s, as ucx_perftest)"}}},
         {"points", json_points}});
    fmt::print("# wrote {}\n", opt.json);
  }
  rt.local_arena().release_block(source_block);
  rt.local_arena().release_block(target);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "transfer_rate: {}\n", e.what());
  return 1;
}
