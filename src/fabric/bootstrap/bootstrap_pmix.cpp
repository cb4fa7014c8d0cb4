// PMIx bootstrap, used under mpirun (Open MPI), prterun or srun --mpi=pmix: allgather is
// put/commit/fence(collect)/get, barrier is a fence; machines are told apart by host name; ranks
// that left the job abnormally are read from the server's process table.
#include <fmt/format.h>
#include <pmix.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <seriema/base/log.hpp>
#include <thread>
#include <utility>
#include <vector>
#include <seriema/fabric/bootstrap.hpp>

namespace seriema::fabric {
namespace {

// Keys are unique for the life of the process: a key put twice could be read back stale by a
// peer. Every rank performs the same collectives in the same order, so counters agree.
std::atomic<std::uint64_t> next_key{0};

// Marks a blob so an empty contribution is still a non-empty PMIx byte object.
constexpr std::byte blob_tag{0x5e};

std::string pmix_text(pmix_status_t rc) {
  return fmt::format("{} ({})", PMIx_Error_string(rc), rc);
}

std::string local_host_name() {
  if (const char* name = std::getenv("PMIX_HOSTNAME"); name != nullptr && *name != '\0') {
    return name;
  }
  char buffer[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buffer, sizeof(buffer) - 1) != 0) return "unknown-host";
  return buffer;
}

class pmix_bootstrap final : public bootstrap {
 public:
  explicit pmix_bootstrap(std::chrono::milliseconds timeout)
      : timeout_s_(static_cast<int>(
            std::clamp<std::int64_t>((timeout.count() + 999) / 1000, 1, INT_MAX))) {
    pmix_status_t rc = PMIx_Init(&me_, nullptr, 0);
    if (rc != PMIX_SUCCESS) {
      throw bootstrap_error(fmt::format(
          "seriema: bootstrap failed: PMIx_Init: {}; PMIX_RANK and PMIX_NAMESPACE are set but the "
          "PMIx server cannot be reached: start the program with mpirun, prterun or srun "
          "--mpi=pmix, or unset PMIX_RANK and PMIX_NAMESPACE",
          pmix_text(rc)));
    }
    try {
      rank_ = static_cast<int>(me_.rank);
      size_ = job_size();
      assign_machines();
      collectives_ = 0;  // the host-name exchange is internal: the caller's first is #1
    } catch (...) {
      PMIx_Finalize(nullptr, 0);
      throw;
    }
  }

  ~pmix_bootstrap() override {
    {
      std::lock_guard lock(watch_mutex_);
      stopping_ = true;
    }
    wake_watcher_.notify_all();
    if (watcher_.joinable()) watcher_.join();
    PMIx_Finalize(nullptr, 0);
  }

  pmix_bootstrap(const pmix_bootstrap&) = delete;
  pmix_bootstrap& operator=(const pmix_bootstrap&) = delete;

  bootstrap_mode mode() const noexcept override { return bootstrap_mode::pmix; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  int machine() const noexcept override { return machine_of_[static_cast<std::size_t>(rank_)]; }
  int machine_count() const noexcept override { return machine_count_; }
  int machine_of(int rank) const noexcept override {
    if (rank < 0 || rank >= size_) return 0;
    return machine_of_[static_cast<std::size_t>(rank)];
  }

  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
    ++collectives_;
    std::string key = fmt::format("seriema.bootstrap.{}", next_key.fetch_add(1));
    std::vector<std::byte> tagged;
    tagged.reserve(mine.size() + 1);
    tagged.push_back(blob_tag);
    tagged.insert(tagged.end(), mine.begin(), mine.end());

    pmix_value_t value;
    std::memset(&value, 0, sizeof(value));
    value.type = PMIX_BYTE_OBJECT;
    value.data.bo.bytes = reinterpret_cast<char*>(tagged.data());
    value.data.bo.size = tagged.size();
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &value);  // copies the bytes
    if (rc != PMIX_SUCCESS) fail("PMIx_Put", "allgather", rc);
    rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) fail("PMIx_Commit", "allgather", rc);
    fence(true, "allgather");

    std::vector<std::vector<std::byte>> all(static_cast<std::size_t>(size_));
    pmix_info_t info;
    PMIx_Info_load(&info, PMIX_TIMEOUT, &timeout_s_, PMIX_INT);
    for (int r = 0; r < size_; ++r) {
      pmix_proc_t proc;
      PMIX_LOAD_PROCID(&proc, me_.nspace, static_cast<pmix_rank_t>(r));
      pmix_value_t* got = nullptr;
      rc = PMIx_Get(&proc, key.c_str(), &info, 1, &got);
      if (rc != PMIX_SUCCESS || got == nullptr) {
        PMIX_INFO_DESTRUCT(&info);
        throw bootstrap_error(fmt::format(
            "seriema: bootstrap failed: rank {}: PMIx_Get of rank {}'s contribution to the "
            "allgather (bootstrap collective #{}): {}; did rank {} die? see the launcher's output",
            rank_, r, collectives_, pmix_text(rc), r));
      }
      bool ok = got->type == PMIX_BYTE_OBJECT && got->data.bo.size >= 1 &&
                static_cast<std::byte>(got->data.bo.bytes[0]) == blob_tag;
      if (ok) {
        auto* bytes = reinterpret_cast<const std::byte*>(got->data.bo.bytes);
        all[static_cast<std::size_t>(r)].assign(bytes + 1, bytes + got->data.bo.size);
      }
      PMIX_VALUE_RELEASE(got);
      if (!ok) {
        PMIX_INFO_DESTRUCT(&info);
        throw bootstrap_error(fmt::format(
            "seriema: bootstrap failed: rank {}: rank {}'s contribution to the allgather is not a "
            "seriema blob; are all ranks running the same program?",
            rank_, r));
      }
    }
    PMIX_INFO_DESTRUCT(&info);
    return all;
  }

  void barrier() override {
    ++collectives_;
    fence(false, "barrier");
  }

  void abort(const std::string& why) noexcept override {
    // mpirun does not always print the abort message: say it here so the cause is visible.
    log::error("rank {} is aborting the job: {}", rank_, why);
    PMIx_Abort(1, why.c_str(), nullptr, 0);
  }

  // Open MPI 4.1's mpirun sends the other processes no PMIx event when one dies (neither
  // PMIX_ERR_PROC_ABORTED nor PMIX_EVENT_PROC_TERMINATED, not even with --enable-recovery), but
  // its process table says which ended abnormally (PMIX_PROC_STATE_TERM_WO_SYNC: exited without
  // PMIx_Finalize; ABORTED_BY_SIG; ...). A thread reads it every watch_interval; a server that
  // answers no process table (some srun versions) ends the watch quietly.
  void watch_peers(peer_left_handler handler) override {
    std::lock_guard lock(watch_mutex_);
    handler_ = std::move(handler);
    if (handler_ && !watcher_.joinable() && size_ > 1) {
      watcher_ = std::thread([this] { watch_process_table(); });
    }
  }

 private:
  int job_size() {
    pmix_proc_t wildcard;
    PMIX_LOAD_PROCID(&wildcard, me_.nspace, PMIX_RANK_WILDCARD);
    pmix_value_t* value = nullptr;
    pmix_status_t rc = PMIx_Get(&wildcard, PMIX_JOB_SIZE, nullptr, 0, &value);
    if (rc != PMIX_SUCCESS || value == nullptr) {
      throw bootstrap_error(fmt::format(
          "seriema: bootstrap failed: PMIx_Get(PMIX_JOB_SIZE): {}; the launcher did not tell "
          "the job size: use mpirun, prterun or srun --mpi=pmix",
          pmix_text(rc)));
    }
    std::int64_t size = -1;
    switch (value->type) {
      case PMIX_UINT32:
        size = value->data.uint32;
        break;
      case PMIX_INT:
        size = value->data.integer;
        break;
      case PMIX_UINT64:
        size = static_cast<std::int64_t>(value->data.uint64);
        break;
      default:
        break;
    }
    PMIX_VALUE_RELEASE(value);
    if (size < 1 || size > INT_MAX || rank_ >= size) {
      throw bootstrap_error(fmt::format(
          "seriema: bootstrap failed: PMIx reports job size {} for rank {}; the launcher's "
          "PMIx data is inconsistent",
          size, rank_));
    }
    return static_cast<int>(size);
  }

  // Gathers every rank's host name and numbers distinct hosts in order of their lowest rank.
  void assign_machines() {
    std::string host = local_host_name();
    auto hosts = allgather(std::as_bytes(std::span<const char>(host.data(), host.size())));
    std::map<std::string, int> ids;
    machine_of_.resize(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      const auto& h = hosts[static_cast<std::size_t>(r)];
      std::string name(reinterpret_cast<const char*>(h.data()), h.size());
      auto [it, inserted] = ids.emplace(name, static_cast<int>(ids.size()));
      machine_of_[static_cast<std::size_t>(r)] = it->second;
    }
    machine_count_ = static_cast<int>(ids.size());
  }

  void fence(bool collect, const char* what) {
    pmix_info_t info[2];
    bool flag = collect;
    PMIx_Info_load(&info[0], PMIX_COLLECT_DATA, &flag, PMIX_BOOL);
    PMIx_Info_load(&info[1], PMIX_TIMEOUT, &timeout_s_, PMIX_INT);
    pmix_proc_t wildcard;
    PMIX_LOAD_PROCID(&wildcard, me_.nspace, PMIX_RANK_WILDCARD);
    pmix_status_t rc = PMIx_Fence(&wildcard, 1, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc != PMIX_SUCCESS) fail("PMIx_Fence", what, rc);
  }

  static constexpr auto watch_interval = std::chrono::milliseconds(500);

  void watch_process_table() {
    std::vector<bool> reported(static_cast<std::size_t>(size_), false);
    std::unique_lock lock(watch_mutex_);
    while (!stopping_) {
      lock.unlock();
      auto ended = ranks_ended_abnormally();
      lock.lock();
      if (!ended) return;
      for (auto& [r, how] : *ended) {
        if (r == rank_ || reported[static_cast<std::size_t>(r)] || !handler_) continue;
        reported[static_cast<std::size_t>(r)] = true;
        handler_(r, how);
      }
      wake_watcher_.wait_for(lock, watch_interval, [this] { return stopping_; });
    }
  }

  // (rank, how it ended) for each process of the job whose state is an error state; nullopt
  // when the server answers no process table.
  std::optional<std::vector<std::pair<int, std::string>>> ranks_ended_abnormally() const {
    pmix_query_t query;
    PMIX_QUERY_CONSTRUCT(&query);
    pmix_status_t rc = PMIX_SUCCESS;
    PMIX_ARGV_APPEND(rc, query.keys, PMIX_QUERY_PROC_TABLE);
    PMIX_INFO_CREATE(query.qualifiers, 1);
    query.nqual = 1;
    PMIX_INFO_LOAD(&query.qualifiers[0], PMIX_NSPACE, me_.nspace, PMIX_STRING);
    pmix_info_t* results = nullptr;
    std::size_t count = 0;
    rc = PMIx_Query_info(&query, 1, &results, &count);
    PMIX_QUERY_DESTRUCT(&query);
    if (rc != PMIX_SUCCESS) return std::nullopt;
    std::vector<std::pair<int, std::string>> ended;
    auto consider = [&](const pmix_proc_info_t& p) {
      if (p.state <= PMIX_PROC_STATE_ERROR || p.proc.rank >= static_cast<pmix_rank_t>(size_)) {
        return;
      }
      ended.emplace_back(static_cast<int>(p.proc.rank),
                         fmt::format("PMIx: left before finalize: {}",
                                     PMIx_Proc_state_string(p.state)));
    };
    for (std::size_t i = 0; i < count; ++i) {
      if (results[i].value.type != PMIX_DATA_ARRAY || results[i].value.data.darray == nullptr) {
        continue;
      }
      const pmix_data_array_t& table = *results[i].value.data.darray;
      // The standard's layout is an array of pmix_proc_info_t; Open MPI 4.1 answers an array of
      // pmix_info_t, each holding one.
      for (std::size_t j = 0; j < table.size; ++j) {
        if (table.type == PMIX_PROC_INFO) {
          consider(static_cast<const pmix_proc_info_t*>(table.array)[j]);
        } else if (table.type == PMIX_INFO) {
          const pmix_info_t& entry = static_cast<const pmix_info_t*>(table.array)[j];
          if (entry.value.type == PMIX_PROC_INFO && entry.value.data.pinfo != nullptr) {
            consider(*entry.value.data.pinfo);
          }
        }
      }
    }
    PMIX_INFO_FREE(results, count);
    return ended;
  }

  [[noreturn]] void fail(const char* call, const char* what, pmix_status_t rc) const {
    std::string hint = rc == PMIX_ERR_TIMEOUT
                           ? fmt::format(
                                 "a rank did not arrive within {} s; raise "
                                 "SERIEMA_BOOTSTRAP_TIMEOUT if ranks are merely slow",
                                 timeout_s_)
                           : std::string("a rank may have died; the launcher's output names it");
    throw bootstrap_error(fmt::format(
        "seriema: bootstrap failed: rank {}: {} for the {} (bootstrap collective #{}) failed: "
        "{}; {}",
        rank_, call, what, collectives_, pmix_text(rc), hint));
  }

  pmix_proc_t me_{};
  int timeout_s_;
  int rank_ = 0;
  int size_ = 1;
  int machine_count_ = 1;
  int collectives_ = 0;
  std::vector<int> machine_of_;
  // The process table's watcher (watch_peers); handler_ is called under watch_mutex_.
  std::mutex watch_mutex_;
  std::condition_variable wake_watcher_;
  bool stopping_ = false;
  peer_left_handler handler_;
  std::thread watcher_;
};

}  // namespace

std::unique_ptr<bootstrap> make_pmix_bootstrap(std::chrono::milliseconds timeout) {
  return std::make_unique<pmix_bootstrap>(timeout);
}

}  // namespace seriema::fabric
