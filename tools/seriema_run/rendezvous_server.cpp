// seriema-run's rendezvous server (rendezvous_server.hpp): the socket directory, connections and
// their frames, the collectives, and how the rendezvous fails.
#include "rendezvous_server.hpp"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <seriema/base/error.hpp>
#include <utility>

namespace seriema::tools::seriema_run {

namespace proto = fabric::launcher_protocol;

namespace {

std::string format_duration(milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{}s", d.count() / 1000);
  return fmt::format("{}ms", d.count());
}

std::string rank_message(const std::string& reason) {
  return fmt::format("seriema: bootstrap failed: {}", reason);
}

}  // namespace

// ---- the socket ----

socket_directory::socket_directory() {
  std::vector<std::string> bases;
  if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') {
    bases.emplace_back(tmp);
  }
  bases.emplace_back("/tmp");
  std::string last_error;
  for (const auto& base : bases) {
    std::string pattern = base + "/seriema-run.XXXXXX";
    // sun_path holds 108 bytes; leave room for "/rendezvous".
    if (pattern.size() + 12 >= sizeof(sockaddr_un{}.sun_path)) {
      last_error = fmt::format("{}: path too long for a Unix socket", base);
      continue;
    }
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (::mkdtemp(buffer.data()) == nullptr) {
      last_error = fmt::format("{}: {}", pattern, std::strerror(errno));
      continue;
    }
    dir_ = buffer.data();
    socket_path_ = dir_ + "/rendezvous";
    return;
  }
  throw seriema::error(fmt::format(
      "cannot create a private directory for the rendezvous socket ({}); set TMPDIR to a "
      "short, writable directory",
      last_error));
}

socket_directory::~socket_directory() {
  ::unlink(socket_path_.c_str());
  ::rmdir(dir_.c_str());
}

rendezvous_server::rendezvous_server(const std::string& socket_path, int ranks,
                                     rendezvous_events& events)
    : ranks_count_(ranks), events_(events), ranks_(static_cast<std::size_t>(ranks)) {
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw seriema::error(fmt::format("socket: {}", std::strerror(errno)));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
  if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listen_fd_, SOMAXCONN) != 0) {
    const int err = errno;
    ::close(listen_fd_);
    throw seriema::error(fmt::format("cannot listen on {}: {}; set TMPDIR to a writable directory",
                                     socket_path, std::strerror(err)));
  }
}

rendezvous_server::~rendezvous_server() {
  for (auto& [id, c] : connections_) ::close(c.fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

// ---- connections ----

void rendezvous_server::add_poll_fds(std::vector<pollfd>& fds) const {
  fds.push_back({listen_fd_, POLLIN, 0});
  for (const auto& [id, c] : connections_) {
    short events = POLLIN;
    if (c.out_done < c.out.size()) events |= POLLOUT;
    fds.push_back({c.fd, events, 0});
  }
}

void rendezvous_server::serve() {
  accept_connections();
  for (auto& [id, c] : connections_) {
    if (!c.closed) read_connection(id, c);
  }
  close_connections();
}

void rendezvous_server::accept_connections() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN, or out of descriptors: retried on the next event
    }
    connection c;
    c.fd = fd;
    connections_.emplace(next_connection_id_++, std::move(c));
  }
}

// Sends what waits for `c`, then reads and handles its frames until it has no more bytes.
void rendezvous_server::read_connection(std::uint64_t id, connection& c) {
  std::byte buffer[1 << 16];
  flush(c);
  while (!c.closed) {
    ssize_t n = ::read(c.fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      c.closed = true;
      break;
    }
    c.reader.feed(std::span<const std::byte>(buffer, static_cast<std::size_t>(n)));
    try {
      while (auto f = c.reader.next()) {
        on_frame(id, c, std::move(*f));
        if (c.closed) break;
      }
    } catch (const proto::protocol_error& e) {
      reject(c, fmt::format("seriema: bootstrap failed: {}", e.what()));
    }
  }
}

// Drops the closed connections; a rank whose reply connection closed may join again.
void rendezvous_server::close_connections() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (!it->second.closed) {
      ++it;
      continue;
    }
    for (auto& slot : ranks_) {
      if (slot.reply_to == it->first) slot.reply_to = 0;
    }
    ::close(it->second.fd);
    it = connections_.erase(it);
  }
}

// Tells the peer why, then drops the connection.
void rendezvous_server::reject(connection& c, const std::string& why) {
  send(c, proto::encode_failure(why));
  c.closed = true;
}

void rendezvous_server::send(connection& c, std::span<const std::byte> frame) {
  if (c.closed) return;
  if (c.out_done == c.out.size()) {
    c.out.clear();
    c.out_done = 0;
  }
  c.out.insert(c.out.end(), frame.begin(), frame.end());
  flush(c);
}

void rendezvous_server::flush(connection& c) {
  while (c.out_done < c.out.size()) {
    ssize_t n = ::send(c.fd, c.out.data() + c.out_done, c.out.size() - c.out_done,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0) {
      c.closed = true;  // the rank went away; its exit status tells the rest
      return;
    }
    c.out_done += static_cast<std::size_t>(n);
  }
}

// ---- messages ----

void rendezvous_server::on_frame(std::uint64_t id, connection& c, proto::frame f) {
  if (c.rank < 0) {
    if (f.type != proto::message_type::hello) {
      reject(c, "seriema: bootstrap failed: the first message to seriema-run must be a hello");
      return;
    }
    on_hello(c, proto::decode_hello(f.payload));
    return;
  }
  switch (f.type) {
    case proto::message_type::contribute:
      on_contribute(id, c, proto::decode_contribute(f.payload));
      return;
    case proto::message_type::abort:
      on_abort(c.rank, proto::decode_text(f.payload));
      return;
    case proto::message_type::running:
      ranks_[static_cast<std::size_t>(c.rank)].running = true;
      return;
    case proto::message_type::finalized:
      ranks_[static_cast<std::size_t>(c.rank)].finalized = true;
      return;
    default:
      reject(c, fmt::format("seriema: bootstrap failed: unexpected message type {} from {}",
                            static_cast<std::uint32_t>(f.type), events_.who(c.rank)));
  }
}

void rendezvous_server::on_hello(connection& c, const proto::hello_message& hello) {
  if (hello.rank >= ranks_count_) {
    reject(c, fmt::format("seriema: bootstrap failed: pid {} claims rank {} but this job has "
                          "{} ranks; SERIEMA_RUN_RANK must be left as seriema-run set it",
                          hello.pid, hello.rank, ranks_count_));
    return;
  }
  c.rank = hello.rank;
  ranks_[static_cast<std::size_t>(c.rank)].ever_connected = true;
}

void rendezvous_server::on_abort(int r, const std::string& why) {
  events_.rank_told_of_failure(r);
  failed_ = true;
  fmt::print(stderr, "seriema-run: {} aborted: {}\n", events_.who(r), why);
  fail_bootstrap(fmt::format("{} aborted: {}", events_.who(r), why));
  events_.rendezvous_failed();
}

bool rendezvous_server::rank_left(int r, std::string how, bool stopped_by_launcher) {
  auto& slot = ranks_[static_cast<std::size_t>(r)];
  slot.left = how;
  check_pending_collective();
  if (!slot.running || slot.finalized || stopped_by_launcher) return false;
  failed_ = true;
  const int told = tell_others_of_failure(r, how + " before finalize");
  const char* others = told == 1 ? "rank" : "ranks";
  if (how == "exited with status 0") {
    fmt::print(stderr,
               "seriema-run: {} exited with status 0 before finalize: a rank whose runtime never "
               "finalized has failed (std::exit in a body, or a return from main that skipped "
               "runtime::finalize()); told {} other running {}\n",
               events_.who(r), told, others);
  } else {
    fmt::print(stderr, "seriema-run: {} left before finalize; told {} other running {}\n",
               events_.who(r), told, others);
  }
  return true;
}

// Sends every other rank still connected that `r` left (`how`); each gets the grace period to
// report it and exit. Returns how many ranks were told.
int rendezvous_server::tell_others_of_failure(int r, const std::string& how) {
  const auto frame = proto::encode_rank_failed(r, how);
  std::vector<bool> told(ranks_.size(), false);
  for (auto& [id, c] : connections_) {
    if (c.closed || c.rank < 0 || c.rank == r) continue;
    const auto other = static_cast<std::size_t>(c.rank);
    if (ranks_[other].left) continue;
    send(c, frame);
    if (c.closed || told[other]) continue;
    told[other] = true;
    events_.rank_told_of_failure(c.rank);
  }
  return static_cast<int>(std::count(told.begin(), told.end(), true));
}

// ---- collectives ----

void rendezvous_server::on_contribute(std::uint64_t id, connection& c,
                                      proto::contribute_message m) {
  int r = c.rank;
  auto& slot = ranks_[static_cast<std::size_t>(r)];
  if (failure_) {
    events_.rank_told_of_failure(r);
    send(c, proto::encode_failure(rank_message(*failure_)));
    return;
  }
  auto now = clock_type::now();
  if (slot.joined == current_) {
    // Joined already: legal only from a new connection after the old one closed.
    if (slot.reply_to != 0) {
      reject(c, fmt::format("seriema: bootstrap failed: {} entered bootstrap collective #{} twice",
                            events_.who(r), current_));
      return;
    }
    slot.reply_to = id;
    slot.blob = std::move(m.blob);
    return;
  }
  auto timeout = milliseconds(m.timeout_ms);
  if (arrived_ == 0) {
    kind_ = m.kind;
    collective_timeout_ = timeout;
    collective_deadline_ = now + timeout;
  } else if (m.kind != kind_) {
    slot.joined = current_;
    slot.reply_to = id;
    ++arrived_;
    fail_bootstrap(fmt::format(
        "{} entered a {} as bootstrap collective #{} while other ranks entered a {}; every rank "
        "must make the same bootstrap calls in the same order",
        events_.who(r), proto::to_string(m.kind), current_, proto::to_string(kind_)));
    return;
  } else if (now + timeout < *collective_deadline_) {
    collective_timeout_ = timeout;
    collective_deadline_ = now + timeout;
  }
  slot.joined = current_;
  slot.blob = std::move(m.blob);
  slot.reply_to = id;
  ++arrived_;
  check_pending_collective();
}

// Completes the current collective when every rank has joined; fails it when a rank that has
// not joined can no longer do so.
void rendezvous_server::check_pending_collective() {
  if (arrived_ == 0 || failure_) return;
  for (int r = 0; r < ranks_count_; ++r) {
    const auto& slot = ranks_[static_cast<std::size_t>(r)];
    if (slot.joined < current_ && slot.left) {
      fail_bootstrap(fmt::format("{} {} before joining the {} (bootstrap collective #{})",
                                 events_.who(r), *slot.left, proto::to_string(kind_), current_));
      return;
    }
  }
  if (arrived_ < ranks_count_) return;
  std::vector<std::vector<std::byte>> blobs;
  blobs.reserve(ranks_.size());
  for (auto& slot : ranks_) blobs.push_back(std::move(slot.blob));
  auto result = proto::encode_result(blobs);
  for (auto& slot : ranks_) {
    if (auto it = connections_.find(slot.reply_to); it != connections_.end()) {
      send(it->second, result);
    }
    slot.reply_to = 0;
    slot.blob.clear();
  }
  arrived_ = 0;
  ++current_;
  collective_deadline_.reset();
}

void rendezvous_server::check_deadline(clock_type::time_point now) {
  if (collective_deadline_ && now >= *collective_deadline_) on_collective_timeout();
}

void rendezvous_server::on_collective_timeout() {
  std::size_t missing = 0;
  for (const auto& slot : ranks_) missing += slot.joined < current_ ? 1 : 0;
  fail_bootstrap(fmt::format(
      "the {} (bootstrap collective #{}) timed out after {}: {} {} not joined it and {} still "
      "running; raise SERIEMA_BOOTSTRAP_TIMEOUT or seriema-run --timeout if {} merely slow",
      proto::to_string(kind_), current_, format_duration(collective_timeout_), missing_ranks(),
      missing == 1 ? "has" : "have", missing == 1 ? "is" : "are",
      missing == 1 ? "it is" : "they are"));
}

// The ranks that have not joined the current collective: the first 8, then how many more.
std::string rendezvous_server::missing_ranks() const {
  std::vector<std::string> missing;
  for (int r = 0; r < ranks_count_; ++r) {
    const auto& slot = ranks_[static_cast<std::size_t>(r)];
    if (slot.joined >= current_) continue;
    missing.push_back(
        fmt::format("{}{}", events_.who(r), slot.ever_connected ? "" : ", never connected"));
  }
  std::string list;
  constexpr std::size_t shown = 8;
  for (std::size_t i = 0; i < missing.size() && i < shown; ++i) {
    list += (i == 0 ? "" : ", ") + missing[i];
  }
  if (missing.size() > shown) list += fmt::format(" and {} more", missing.size() - shown);
  return list;
}

// The rendezvous is broken for good: every pending and later collective fails with `reason`.
void rendezvous_server::fail_bootstrap(const std::string& reason) {
  if (failure_) return;
  failure_ = reason;
  failed_ = true;
  fmt::print(stderr, "seriema-run: bootstrap failed: {}\n", reason);
  auto frame = proto::encode_failure(rank_message(reason));
  for (int r = 0; r < ranks_count_; ++r) {
    auto& slot = ranks_[static_cast<std::size_t>(r)];
    if (slot.joined == current_ && arrived_ > 0) {
      if (auto it = connections_.find(slot.reply_to); it != connections_.end()) {
        send(it->second, frame);
        events_.rank_told_of_failure(r);
      }
    }
    slot.reply_to = 0;
    slot.blob.clear();
  }
  arrived_ = 0;
  collective_deadline_.reset();
  events_.rendezvous_failed();
}

}  // namespace seriema::tools::seriema_run
