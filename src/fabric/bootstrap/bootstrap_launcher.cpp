// Client side of the seriema-run rendezvous: connects to the launcher's Unix-domain socket and
// has the launcher serve allgather and barrier (see launcher_protocol.hpp for the wire format);
// tells it when the runtime is up and when it finalized, and hears from it which ranks left the
// job before finalizing.
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <seriema/base/settings.hpp>
#include <seriema/fabric/bootstrap.hpp>

#include <seriema/fabric/detail/launcher_protocol.hpp>
#include <seriema/fabric/detail/settings.hpp>

namespace seriema::fabric {
namespace {

namespace proto = launcher_protocol;
using clock = std::chrono::steady_clock;

constexpr const char* not_launched_fix =
    "these variables are set by seriema-run: start the program with seriema-run, or unset "
    "SERIEMA_RUN_SOCKET to run it as a single process";

int env_int(const char* name, int min_value, int max_value, std::optional<int> fallback) {
  auto text = config::raw(name);
  if (!text) {
    if (fallback) return *fallback;
    throw bootstrap_error(
        fmt::format("seriema: bootstrap failed: SERIEMA_RUN_SOCKET is set but {} is not; {}", name,
                    not_launched_fix));
  }
  auto value = config::parse_unsigned(name, *text);
  if (value < static_cast<std::uint64_t>(min_value) ||
      value > static_cast<std::uint64_t>(max_value)) {
    throw bootstrap_error(
        fmt::format("seriema: bootstrap failed: {}={} is out of range (expected {}..{}); {}", name,
                    *text, min_value, max_value, not_launched_fix));
  }
  return static_cast<int>(value);
}

// One reader thread owns the socket's receiving side for the bootstrap's whole life: it hands
// collective answers (result, failure) to the thread waiting in collective(), and the launcher's
// rank failure notices, which come at any time, to the watch_peers() handler. Writes (from the
// collectives' thread, and mark_* or abort from any thread) go under write_mutex_.
class launcher_bootstrap final : public bootstrap {
 public:
  explicit launcher_bootstrap(std::chrono::milliseconds timeout) : timeout_(timeout) {
    socket_path_ = config::raw("SERIEMA_RUN_SOCKET").value_or("");
    size_ = env_int("SERIEMA_RUN_SIZE", 1, 1 << 24, std::nullopt);
    rank_ = env_int("SERIEMA_RUN_RANK", 0, size_ - 1, std::nullopt);
    machines_ = env_int("SERIEMA_RUN_MACHINES", 1, size_, 1);
    machine_ = proto::machine_of_rank(rank_, size_, machines_);
    int told = env_int("SERIEMA_RUN_MACHINE", 0, machines_ - 1, machine_);
    if (told != machine_) {
      throw bootstrap_error(fmt::format(
          "seriema: bootstrap failed: SERIEMA_RUN_MACHINE={} but rank {} of {} on {} machines "
          "belongs to machine {}; {}",
          told, rank_, size_, machines_, machine_, not_launched_fix));
    }
    connect_to_launcher();
    try {
      reader_ = std::thread([this] { read_from_launcher(); });
    } catch (...) {
      ::close(fd_);  // the destructor does not run for a constructor that throws
      throw;
    }
  }

  ~launcher_bootstrap() override {
    // Shutting the socket down wakes the reader (end of stream) and tells the launcher we left.
    ::shutdown(fd_, SHUT_RDWR);
    reader_.join();
    ::close(fd_);
  }

  launcher_bootstrap(const launcher_bootstrap&) = delete;
  launcher_bootstrap& operator=(const launcher_bootstrap&) = delete;

  bootstrap_mode mode() const noexcept override { return bootstrap_mode::launcher; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  int machine() const noexcept override { return machine_; }
  int machine_count() const noexcept override { return machines_; }
  int machine_of(int rank) const noexcept override {
    return proto::machine_of_rank(rank, size_, machines_);
  }

  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
    if (mine.size() > proto::max_blob_bytes / static_cast<std::size_t>(size_)) {
      throw bootstrap_error(fmt::format(
          "seriema: bootstrap failed: rank {} contributes {} bytes to an allgather; seriema-run "
          "carries at most {} bytes per rank for {} ranks: exchange less through the bootstrap",
          rank_, mine.size(), proto::max_blob_bytes / static_cast<std::size_t>(size_), size_));
    }
    return collective(proto::collective_kind::allgather, mine);
  }

  void barrier() override { collective(proto::collective_kind::barrier, {}); }

  void abort(const std::string& why) noexcept override {
    if (fd_ < 0) return;
    try {
      auto frame = proto::encode_abort(fmt::format("{}", why));
      (void)write_all(frame);
    } catch (...) {
      // Best effort: the launcher also learns of the failure from this process's exit status.
    }
  }

  void mark_running() noexcept override { tell(proto::encode_running); }
  void mark_finalized() noexcept override { tell(proto::encode_finalized); }

  void watch_peers(peer_left_handler handler) override {
    std::lock_guard lock(handler_mutex_);
    handler_ = std::move(handler);
    if (!handler_) return;
    for (auto& notice : early_notices_) handler_(notice.rank, notice.how);
    early_notices_.clear();
  }

 private:
  void connect_to_launcher() {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (socket_path_.size() >= sizeof(address.sun_path)) {
      throw bootstrap_error(fmt::format(
          "seriema: bootstrap failed: SERIEMA_RUN_SOCKET={} is longer than a Unix socket path may "
          "be ({} bytes); {}",
          socket_path_, sizeof(address.sun_path) - 1, not_launched_fix));
    }
    std::memcpy(address.sun_path, socket_path_.c_str(), socket_path_.size() + 1);
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
      throw bootstrap_error(
          fmt::format("seriema: bootstrap failed: socket(AF_UNIX): {}", std::strerror(errno)));
    }
    int rc;
    do {
      rc = ::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      int err = errno;
      ::close(fd_);
      fd_ = -1;
      throw bootstrap_error(fmt::format(
          "seriema: bootstrap failed: cannot connect to seriema-run at SERIEMA_RUN_SOCKET={}: {}; "
          "the launcher has exited, or {}",
          socket_path_, std::strerror(err), not_launched_fix));
    }
    if (!write_all(proto::encode_hello({rank_, static_cast<int>(::getpid())}))) {
      ::close(fd_);  // the destructor does not run for a constructor that throws
      fd_ = -1;
      throw bootstrap_error(went_away("while saying hello"));
    }
  }

  std::vector<std::vector<std::byte>> collective(proto::collective_kind kind,
                                                 std::span<const std::byte> mine) {
    if (broken_) throw bootstrap_error(*broken_);
    ++collectives_;
    std::string during = fmt::format("during the {} (bootstrap collective #{} of this process)",
                                     proto::to_string(kind), collectives_);
    auto timeout_ms = static_cast<std::uint32_t>(
        std::min<std::int64_t>(timeout_.count(), std::numeric_limits<std::uint32_t>::max()));
    if (!write_all(proto::encode_contribute(kind, timeout_ms, mine))) fail(went_away(during));

    // The launcher enforces the timeout and names the missing ranks; this deadline is only a
    // backstop for a launcher that stopped answering.
    auto deadline = clock::now() + timeout_ + std::chrono::seconds(2);
    proto::frame reply = receive(deadline, during);
    switch (reply.type) {
      case proto::message_type::result:
        try {
          return proto::decode_result(reply.payload, size_);
        } catch (const proto::protocol_error& e) {
          fail(fmt::format("seriema: bootstrap failed: bad answer from seriema-run {}: {}", during,
                           e.what()));
        }
      case proto::message_type::failure:
        fail(proto::decode_text(reply.payload));
      default:
        fail(
            fmt::format("seriema: bootstrap failed: unexpected message type {} from seriema-run {}",
                        static_cast<std::uint32_t>(reply.type), during));
    }
  }

  // The next answer to a collective, as the reader thread hands it over, by `deadline`.
  proto::frame receive(clock::time_point deadline, const std::string& during) {
    std::unique_lock lock(answers_mutex_);
    const bool ready = answered_.wait_until(lock, deadline, [&] {
      return !answers_.empty() || reader_error_ || launcher_gone_;
    });
    if (!answers_.empty()) {
      proto::frame reply = std::move(answers_.front());
      answers_.pop_front();
      return reply;
    }
    if (!ready) {
      fail(fmt::format(
          "seriema: bootstrap failed: rank {}: seriema-run did not answer within {} ms {}; it "
          "may be stuck (socket {})",
          rank_, (timeout_ + std::chrono::seconds(2)).count(), during, socket_path_));
    }
    if (reader_error_) {
      fail(fmt::format("seriema: bootstrap failed: {} {}", *reader_error_, during));
    }
    fail(went_away(during));
  }

  // The reader thread: until the launcher closes the connection, or the destructor shuts it down.
  void read_from_launcher() noexcept {
    std::byte buffer[1 << 16];
    proto::frame_reader reader;
    for (;;) {
      ssize_t got = ::read(fd_, buffer, sizeof(buffer));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        stop_reading(std::nullopt);
        return;
      }
      try {
        reader.feed(std::span<const std::byte>(buffer, static_cast<std::size_t>(got)));
        while (auto frame = reader.next()) on_frame(std::move(*frame));
      } catch (const std::exception& e) {
        stop_reading(fmt::format("bad message from seriema-run: {}", e.what()));
        return;
      }
    }
  }

  void on_frame(proto::frame frame) {
    if (frame.type == proto::message_type::rank_failed) {
      auto notice = proto::decode_rank_failed(frame.payload);
      if (notice.rank < 0 || notice.rank >= size_ || notice.rank == rank_) return;
      notice.how = "seriema-run: " + notice.how;
      std::lock_guard lock(handler_mutex_);
      if (handler_) {
        handler_(notice.rank, notice.how);
      } else {
        early_notices_.push_back(std::move(notice));
      }
      return;
    }
    std::lock_guard lock(answers_mutex_);
    answers_.push_back(std::move(frame));  // checked by the collective that receives it
    answered_.notify_all();
  }

  void stop_reading(std::optional<std::string> error) {
    std::lock_guard lock(answers_mutex_);
    launcher_gone_ = true;
    reader_error_ = std::move(error);
    answered_.notify_all();
  }

  template <class Encode>
  void tell(Encode encode) noexcept {
    try {
      (void)write_all(encode());
    } catch (...) {
      // Best effort: a launcher that went away cannot be told anything.
    }
  }

  // False when the launcher closed the connection.
  bool write_all(std::span<const std::byte> bytes) noexcept {
    std::lock_guard lock(write_mutex_);
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      bytes = bytes.subspan(static_cast<std::size_t>(n));
    }
    return true;
  }

  std::string went_away(const std::string& during) const {
    return fmt::format(
        "seriema: bootstrap failed: rank {}: seriema-run went away (its socket {} closed) {}; "
        "see the launcher's output for the cause",
        rank_, socket_path_, during);
  }

  // A failed collective leaves the connection in an unknown state: later ones fail the same way.
  [[noreturn]] void fail(std::string message) {
    broken_ = message;
    throw bootstrap_error(std::move(message));
  }

  std::chrono::milliseconds timeout_;
  std::string socket_path_;
  int rank_ = 0;
  int size_ = 1;
  int machine_ = 0;
  int machines_ = 1;
  int fd_ = -1;
  int collectives_ = 0;                // owner: the collectives' thread
  std::optional<std::string> broken_;  // owner: the collectives' thread
  std::mutex write_mutex_;
  // From the reader thread to the collectives' thread.
  std::mutex answers_mutex_;
  std::condition_variable answered_;
  std::deque<proto::frame> answers_;
  std::optional<std::string> reader_error_;
  bool launcher_gone_ = false;
  // Rank failure notices: to the handler, or kept until one is installed.
  std::mutex handler_mutex_;
  peer_left_handler handler_;
  std::vector<proto::rank_failed_message> early_notices_;
  std::thread reader_;  // last: started once everything it uses exists
};

}  // namespace

std::unique_ptr<bootstrap> make_launcher_bootstrap(std::chrono::milliseconds timeout) {
  return std::make_unique<launcher_bootstrap>(timeout);
}

}  // namespace seriema::fabric
