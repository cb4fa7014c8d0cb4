// UCX context/worker/endpoint wrappers: creation with seriema's defaults, peer-failure tracking,
// bounded close, and transport introspection for seriema-info and messages.
#include <dirent.h>
#include <fmt/format.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/base/settings.hpp>
#include <seriema/transfer/detail/settings.hpp>
#include <seriema/transfer/ucx.hpp>
#include "pages.hpp"
#include <sstream>
#include <thread>

namespace seriema::transfer {

void check_ucx(ucs_status_t status, const char* what) {
  if (status != UCS_OK) {
    throw ucx_error(fmt::format("{}: {}", what, ucs_status_string(status)));
  }
}

context_options context_options::from_environment() {
  config::problems found;  // every setting read, so that one message names every problem
  context_options options;
  found.check([&] { options.peer_errors = config::get_bool("SERIEMA_PEER_ERRORS"); });
  found.check([&] {
    options.keepalive_ms = static_cast<long>(config::get_duration("SERIEMA_KEEPALIVE").count());
  });
  found.check([&] { options.pages = detail::pages_from_environment(); });
  found.throw_if_any();
  return options;
}

namespace {

// Applies a UCX setting unless the user chose it explicitly through the UCX_* environment.
void modify_unless_user_set(ucp_config_t* config, const char* name, const std::string& value) {
  std::string env_name = std::string("UCX_") + name;
  if (std::getenv(env_name.c_str()) != nullptr) return;
  check_ucx(ucp_config_modify(config, name, value.c_str()),
            fmt::format("ucp_config_modify({}={})", name, value).c_str());
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ",") + name;
  return out;
}

constexpr const char* hugetlb_mode_variables[] = {"UCX_SYSV_HUGETLB_MODE", "UCX_POSIX_HUGETLB_MODE",
                                                  "UCX_MM_HUGETLB_MODE"};

bool ucx_ternary_is_off(std::string_view value) {
  for (std::string_view off : {"n", "no", "off", "0", "false"}) {
    if (value == off) return true;
  }
  return false;
}

// Lets UCX's SysV and POSIX allocators (ucp_mem_map ALLOCATE) try hugetlb pages, or forbids
// them, per SERIEMA_PAGES. MM_HUGETLB_MODE reaches both memory domains' configuration (UCX
// applies unknown context keys to every MD config that has them). A UCX_*_HUGETLB_MODE the user
// set is kept as a whole: modifying the shared key would override it.
ucx_hugetlb apply_hugetlb_mode(ucp_config_t* config, page_preference pages) {
  for (const char* name : hugetlb_mode_variables) {
    if (const char* value = std::getenv(name)) {
      // SysV allocates first (UCX_ALLOC_PRIO); its mode is what decides.
      const char* sysv = std::getenv("UCX_SYSV_HUGETLB_MODE");
      return {sysv == nullptr || !ucx_ternary_is_off(sysv),
              fmt::format("{}={} (set by the user; SERIEMA_PAGES does not override it)", name,
                          value)};
    }
  }
  const bool allowed =
      pages != page_preference::transparent_huge && pages != page_preference::normal;
  constexpr const char* page_names[] = {"auto", "1g", "2m", "thp", "normal"};
  check_ucx(ucp_config_modify(config, "MM_HUGETLB_MODE", allowed ? "try" : "n"),
            "ucp_config_modify(MM_HUGETLB_MODE)");
  return {allowed, fmt::format("{} (set by seriema for SERIEMA_PAGES={})", allowed ? "try" : "n",
                               page_names[static_cast<int>(pages)])};
}

}  // namespace

namespace {

// Transport names and aliases UCX_TLS may legitimately contain on some machine (UCX 1.13+). A
// token outside this list and outside what this UCX offers is a typo that UCX would only warn
// about while silently using the other transports.
constexpr std::string_view known_transport_names[] = {
    "all",      "sm",        "shm",      "mm",        "self",     "tcp",      "posix",
    "sysv",     "cma",       "knem",     "xpmem",     "ib",       "rc",       "rc_v",
    "rc_x",     "rc_verbs",  "rc_mlx5",  "ud",        "ud_v",     "ud_x",     "ud_verbs",
    "ud_mlx5",  "dc",        "dc_x",     "dc_mlx5",   "cuda",     "cuda_copy", "cuda_ipc",
    "gdr_copy", "rocm",      "rocm_copy", "rocm_ipc", "rocm_gdr", "ugni",     "ugni_rdma",
    "ugni_udt", "ugni_smsg", "ze",       "ze_copy",   "rdmacm",   "sockcm",   "srd"};

// True unless UCX_TLS is a positive list naming no shared-memory transport.
bool tls_may_use_shared_memory() {
  const char* tls = std::getenv("UCX_TLS");
  if (tls == nullptr || *tls == '\0' || *tls == '^' || *tls == '\\') return true;
  std::string list = std::string(",") + tls + ",";
  for (const char* name : {",all,", ",sm,", ",shm,", ",mm,", ",posix,", ",sysv,"}) {
    if (list.find(name) != std::string::npos) return true;
  }
  return false;
}

void validate_tls_setting(const std::vector<std::string>& available) {
  const char* tls = std::getenv("UCX_TLS");
  if (tls == nullptr) return;
  std::string_view list(tls);
  if (!list.empty() && (list.front() == '^' || list.front() == '\\')) list.remove_prefix(1);
  std::string offered;
  for (const auto& resource : available) {
    std::string name = resource.substr(0, resource.find('/'));
    if (offered.find(name) == std::string::npos) offered += (offered.empty() ? "" : ", ") + name;
  }
  while (!list.empty()) {
    auto comma = list.find(',');
    std::string_view token = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (auto colon = token.find(':'); colon != std::string_view::npos) token = token.substr(0, colon);
    if (token.empty()) continue;
    bool known = false;
    for (auto name : known_transport_names) known = known || name == token;
    for (const auto& resource : available) {
      known = known || resource.substr(0, resource.find('/')) == token;
    }
    if (!known) {
      throw config_error(fmt::format(
          "UCX_TLS={}: unknown transport '{}'; usable here: {} (aliases: all, sm, shm)", tls,
          token, offered));
    }
  }
}

}  // namespace

ucx_context::ucx_context(const context_options& options) : options_(options) {
  if (options_.peer_errors && tls_may_use_shared_memory()) {
    // Without these, UCX 1.13's shm transports refuse (or hang creating) endpoints in peer
    // error-handling mode. They are transport-level settings that ucp_config_modify does not
    // pass down to the posix/sysv interfaces, so they go through the environment, which UCX
    // reads when it opens them. A value the user set is kept (overwrite = 0). When UCX_TLS
    // rules shm out they are left alone (UCX would warn about unused variables).
    setenv("UCX_POSIX_ERROR_HANDLING", "y", 0);
    setenv("UCX_SYSV_ERROR_HANDLING", "y", 0);
  }
  if (std::getenv("UCX_NET_DEVICES") == nullptr) applied_net_devices_ = options_.net_devices;
  ucs_status_t status = initialize(applied_net_devices_);
  if (status != UCS_OK && !applied_net_devices_.empty()) {
    // With a positive UCX_TLS, devices no enabled transport runs on can leave UCX nothing at all.
    log::warning("ucp_init with network devices {} (SERIEMA_NET_DEVICES) failed ({}); UCX "
                 "chooses the devices itself",
                 join_names(applied_net_devices_), ucs_status_string(status));
    applied_net_devices_.clear();
    status = initialize(applied_net_devices_);
  }
  if (status != UCS_OK) {
    const char* tls = std::getenv("UCX_TLS");
    throw ucx_error(fmt::format("ucp_init failed: {}{}", ucs_status_string(status),
                                tls ? fmt::format(" (UCX_TLS={}: is every transport named there "
                                                  "known? ucx_info -d lists them)",
                                                  tls)
                                    : std::string()));
  }
  try {
    std::vector<std::string> available = ucx_available_transports(*this);
    if (!restriction_was_usable(available)) available = ucx_available_transports(*this);
    validate_tls_setting(available);
    for (const auto& resource : available) {
      const std::string name = resource.substr(0, resource.find('/'));
      network_rdma_ = network_rdma_ || name.starts_with("rc") || name.starts_with("dc") ||
                      name == "ugni_rdma";
      shared_memory_domains_ = shared_memory_domains_ || name == "sysv" || name == "posix";
    }
  } catch (...) {
    ucp_cleanup(context_);
    context_ = nullptr;
    throw;
  }
}

// ucp_init with seriema's settings and, unless `net_devices` is empty, UCX_NET_DEVICES restricted
// to them (which limits network devices only: shared memory and self are never affected).
ucs_status_t ucx_context::initialize(const std::vector<std::string>& net_devices) {
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) {
    // The usual cause is a bad UCX_* variable; UCX names it on stderr, we say where to look.
    throw ucx_error(fmt::format(
        "UCX configuration rejected ({}); check the UCX_* variables (ucx_info -c lists them)",
        ucs_status_string(status)));
  }
  try {
    hugetlb_ = apply_hugetlb_mode(config, options_.pages);
    if (options_.peer_errors) {
      modify_unless_user_set(config, "KEEPALIVE_INTERVAL", fmt::format("{}ms", options_.keepalive_ms));
    }
    if (!net_devices.empty()) {
      modify_unless_user_set(config, "NET_DEVICES", join_names(net_devices));
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                        UCP_PARAM_FIELD_REQUEST_SIZE | UCP_PARAM_FIELD_REQUEST_INIT;
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64 | UCP_FEATURE_AM;
    params.mt_workers_shared = 1;
    params.request_size = request_reserve;
    // Our bytes of a fresh request start zeroed; users reset them before freeing (transmitter).
    params.request_init = [](void* request) { std::memset(request, 0, request_reserve); };
    status = ucp_init(&params, config, &context_);
  } catch (...) {
    ucp_config_release(config);
    throw;
  }
  ucp_config_release(config);
  return status;
}

// After a restricted ucp_init: true when the restriction stands (no restriction, or UCX offers a
// transport on one of the devices). Otherwise none of the devices was usable by UCX: when an
// unrestricted context offers more (network) resources, UCX is initialized again without the
// restriction and a warning says so; when it offers the same, no network transport is enabled
// (UCX_TLS) and the restriction changed nothing. Either way the unrestricted context is kept and
// net_devices() is empty.
bool ucx_context::restriction_was_usable(const std::vector<std::string>& available) {
  if (applied_net_devices_.empty()) return true;
  for (const auto& resource : available) {
    const std::string device = resource.substr(resource.find('/') + 1);
    for (const auto& name : applied_net_devices_) {
      if (device == name) return true;
    }
  }
  const std::string asked = join_names(applied_net_devices_);
  ucp_cleanup(context_);
  context_ = nullptr;
  applied_net_devices_.clear();
  check_ucx(initialize({}), "ucp_init (without a network device restriction)");
  if (ucx_available_transports(*this).size() > available.size()) {
    log::warning("network devices {} (SERIEMA_NET_DEVICES) are not usable by UCX here; UCX "
                 "chooses the devices itself (set SERIEMA_NET_DEVICES=none, or name usable ones: "
                 "ucx_info -d lists them)",
                 asked);
  }
  return false;
}

ucx_context::~ucx_context() {
  if (context_ != nullptr) ucp_cleanup(context_);
}

ucx_worker::ucx_worker(ucx_context& context, worker_sharing sharing) : context_(context) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode =
      sharing == worker_sharing::multi_thread ? UCS_THREAD_MODE_MULTI : UCS_THREAD_MODE_SINGLE;
  check_ucx(ucp_worker_create(context.handle(), &params, &worker_), "ucp_worker_create");
  if (sharing == worker_sharing::multi_thread) {
    ucp_worker_attr_t attr{};
    attr.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE;
    if (ucp_worker_query(worker_, &attr) == UCS_OK && attr.thread_mode != UCS_THREAD_MODE_MULTI) {
      ucp_worker_destroy(worker_);
      throw ucx_error("ucp_worker_create: this UCX build cannot share a worker between threads "
                      "(built without --enable-mt)");
    }
  }
  ucp_address_t* address = nullptr;
  std::size_t length = 0;
  ucs_status_t status = ucp_worker_get_address(worker_, &address, &length);
  if (status != UCS_OK) {
    ucp_worker_destroy(worker_);
    check_ucx(status, "ucp_worker_get_address");
  }
  auto* bytes = reinterpret_cast<const std::byte*>(address);
  address_.assign(bytes, bytes + length);
  ucp_worker_release_address(worker_, address);
}

ucx_worker::~ucx_worker() {
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
}

namespace {

// UCX creates the shared-memory segments behind UCP_MEM_MAP_ALLOCATE readable and writable by
// its group (SysV 0660; POSIX files per the umask). The job's processes run as one user, so
// owner-only access loses nothing and keeps other users of the group out (docs/security.md).
// SysV: every segment this process created; POSIX: every open /dev/shm/ucx_* file of it.
void restrict_shared_memory_to_owner() noexcept {
  if (std::FILE* list = std::fopen("/proc/sysvipc/shm", "r")) {
    char line[512];
    (void)std::fgets(line, sizeof line, list);  // the column titles
    while (std::fgets(line, sizeof line, list) != nullptr) {
      long long key = 0, size = 0;
      int id = -1, creator = 0;
      unsigned perms = 0;
      if (std::sscanf(line, "%lld %d %o %lld %d", &key, &id, &perms, &size, &creator) != 5) {
        continue;
      }
      if (creator != getpid() || (perms & 077) == 0) continue;
      shmid_ds desc{};
      if (shmctl(id, IPC_STAT, &desc) != 0) continue;
      desc.shm_perm.mode &= ~static_cast<unsigned short>(077);
      (void)shmctl(id, IPC_SET, &desc);
    }
    std::fclose(list);
  }
  if (DIR* fds = opendir("/proc/self/fd")) {
    while (dirent* entry = readdir(fds)) {
      char link[320];
      char target[256];
      std::snprintf(link, sizeof link, "/proc/self/fd/%s", entry->d_name);
      const ssize_t n = readlink(link, target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      if (std::strncmp(target, "/dev/shm/ucx_", 13) != 0) continue;
      (void)fchmod(std::atoi(entry->d_name), S_IRUSR | S_IWUSR);
    }
    closedir(fds);
  }
}

}  // namespace

ucs_status_t map_ucx_allocated_memory(ucx_context& context, std::size_t length, ucp_mem_h* memh,
                                      std::byte** base) noexcept {
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  params.length = length;
  params.flags = UCP_MEM_MAP_ALLOCATE;
  ucs_status_t status = ucp_mem_map(context.handle(), &params, memh);
  if (status != UCS_OK) return status;
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
  status = ucp_mem_query(*memh, &attr);
  if (status != UCS_OK) {
    ucp_mem_unmap(context.handle(), *memh);
    *memh = nullptr;
    return status;
  }
  *base = static_cast<std::byte*>(attr.address);
  restrict_shared_memory_to_owner();
  return UCS_OK;
}

std::vector<std::byte> pack_rkey(ucx_context& context, ucp_mem_h memh) {
  void* packed = nullptr;
  std::size_t size = 0;
  check_ucx(ucp_rkey_pack(context.handle(), memh, &packed, &size), "ucp_rkey_pack");
  auto* bytes = static_cast<const std::byte*>(packed);
  std::vector<std::byte> out(bytes, bytes + size);
  ucp_rkey_buffer_release(packed);
  return out;
}

ucs_status_t wait_request(ucx_worker& worker, void* request) noexcept {
  return wait_request_until(worker, request, std::chrono::steady_clock::time_point::max());
}

namespace {
// Progresses `worker` until `request` completed, `give_up()` held (UCS_ERR_CANCELED) or the
// deadline passed (UCS_ERR_TIMED_OUT); frees the request either way (UCX finishes it).
template <class GiveUp>
ucs_status_t wait_request_or(ucx_worker& worker, void* request,
                             std::chrono::steady_clock::time_point deadline,
                             const GiveUp& give_up) noexcept {
  if (request == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(request)) return UCS_PTR_STATUS(request);
  const bool bounded = deadline != std::chrono::steady_clock::time_point::max();
  ucs_status_t status;
  int idle = 0;
  while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) {
    if (worker.progress()) continue;
    if (give_up()) {
      status = UCS_ERR_CANCELED;
      break;
    }
    if (bounded && std::chrono::steady_clock::now() >= deadline) {
      status = UCS_ERR_TIMED_OUT;
      break;
    }
    if (++idle > 1000) {
      std::this_thread::yield();  // oversubscribed machines: let the peer run
      idle = 0;
    }
  }
  ucp_request_free(request);
  return status;
}
}  // namespace

ucs_status_t wait_request_until(ucx_worker& worker, void* request,
                                std::chrono::steady_clock::time_point deadline) noexcept {
  return wait_request_or(worker, request, deadline, [] { return false; });
}

namespace {

// What one of UCX's *_print_info functions writes, as a string ("" if it cannot be captured).
template <class Print>
std::string capture_output(Print print) {
  char* text = nullptr;
  std::size_t size = 0;
  FILE* stream = open_memstream(&text, &size);
  if (stream == nullptr) return {};
  print(stream);
  std::fclose(stream);
  std::string out(text, size);
  std::free(text);
  return out;
}

}  // namespace

void ucx_endpoint::on_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* self = static_cast<ucx_endpoint*>(arg);
  ucs_status_t expected = UCS_OK;
  if (self->failure_.compare_exchange_strong(expected, status, std::memory_order_acq_rel) &&
      self->on_failure_) {
    self->on_failure_(status);
  }
}

ucx_endpoint::ucx_endpoint(ucx_worker& worker, std::span<const std::byte> peer_address,
                           std::string peer, std::function<void(ucs_status_t)> on_failure)
    : worker_(worker), peer_(std::move(peer)), on_failure_(std::move(on_failure)) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  params.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
  if (worker.context().options().peer_errors) {
    params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &ucx_endpoint::on_error;
    params.err_handler.arg = this;
  }
  ucs_status_t status = ucp_ep_create(worker.handle(), &params, &endpoint_);
  if (status != UCS_OK) {
    throw ucx_error(fmt::format(
        "cannot connect to {}: {} (has it exited? if it is alive: no common transport? check "
        "UCX_TLS / UCX_NET_DEVICES on both sides; try UCX_TLS=tcp,sm,self)",
        peer_, ucs_status_string(status)));
  }
}

ucs_status_t ucx_endpoint::flush_blocking(std::chrono::steady_clock::time_point deadline) noexcept {
  if (failed()) return failure();
  ucp_request_param_t param{};
  ucs_status_t status = wait_request_until(worker_, ucp_ep_flush_nbx(endpoint_, &param), deadline);
  return failed() ? failure() : status;
}

ucs_status_t ucx_endpoint::flush_blocking(std::chrono::steady_clock::time_point deadline,
                                          const std::function<bool()>& give_up) noexcept {
  if (failed()) return failure();
  ucp_request_param_t param{};
  const ucs_status_t status = wait_request_or(worker_, ucp_ep_flush_nbx(endpoint_, &param),
                                              deadline, [&] { return failed() || give_up(); });
  return failed() ? failure() : status;
}

ucx_endpoint::~ucx_endpoint() {
  if (endpoint_ == nullptr) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = failed() || close_forcefully_ ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  void* request = ucp_ep_close_nbx(endpoint_, &param);
  if (request == nullptr || UCS_PTR_IS_ERR(request)) return;
  // Bounded: a peer that vanished without an error callback must not hang our shutdown.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (ucp_request_check_status(request) == UCS_INPROGRESS) {
    if (std::chrono::steady_clock::now() > deadline) break;
    if (!worker_.progress()) std::this_thread::yield();
  }
  ucp_request_free(request);
}

std::string ucx_endpoint::describe_transports() const {
  std::string info = capture_output([this](FILE* stream) { ucp_ep_print_info(endpoint_, stream); });
  if (info.empty()) return "unknown";
  // Lines look like "#   lane[0]:  3:posix/memory.0 md[3] ... rma_bw#0 ..."; keep name + role.
  std::vector<std::string> lanes;
  std::istringstream lines(info);
  std::string line;
  while (std::getline(lines, line)) {
    auto lane = line.find("lane[");
    if (lane == std::string::npos) continue;
    auto colon = line.find(':', lane);
    if (colon == std::string::npos) continue;
    std::istringstream fields(line.substr(colon + 1));
    std::string resource;
    fields >> resource;  // "3:posix/memory.0"
    auto sep = resource.find(':');
    if (sep != std::string::npos) resource = resource.substr(sep + 1);
    std::string roles;
    for (const char* role : {"am", "rma", "rma_bw", "amo", "rkey_ptr"}) {
      if (line.find(std::string(" ") + role) != std::string::npos ||
          line.find(std::string(role) + "#") != std::string::npos) {
        roles += roles.empty() ? role : std::string(",") + role;
      }
    }
    lanes.push_back(fmt::format("{}[{}]", resource, roles));
  }
  if (lanes.empty()) return "unknown";
  std::string out;
  for (std::size_t i = 0; i < lanes.size(); ++i) out += (i ? " " : "") + lanes[i];
  return out;
}

std::string ucx_version() {
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  return fmt::format("{}.{}.{}", major, minor, release);
}

std::vector<std::string> ucx_available_transports(ucx_context& context) {
  std::string info =
      capture_output([&context](FILE* stream) { ucp_context_print_info(context.handle(), stream); });
  std::vector<std::string> out;
  std::istringstream lines(info);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("resource") == std::string::npos) continue;
    auto dashes = line.rfind("-- ");
    if (dashes != std::string::npos) out.push_back(line.substr(dashes + 3));
  }
  return out;
}

}  // namespace seriema::transfer
