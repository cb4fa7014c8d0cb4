// seriema-run's rendezvous server: the launcher's end of the bootstrap protocol
// (include/seriema/fabric/detail/launcher_protocol.hpp) on a private Unix socket. Ranks say hello,
// then contribute to collectives (allgather, barrier), which it answers once every rank joined;
// an abort, a rank that left, a timeout or a protocol error breaks the rendezvous for good, and
// every pending and later collective fails with the reason. A rank's runtime says when it is up
// (running) and when it finalized: one that leaves in between has failed, and the server tells
// every other rank (rank_failed), since UCX cannot see the death of a peer a rank never talked
// to. It knows ranks by number only: the job tells it when one has left (rank_left) and learns
// through rendezvous_events which ranks were told of a failure and when the job has failed.
// Thread-safety: one thread (the job's event loop).
#pragma once

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <seriema/fabric/detail/launcher_protocol.hpp>
#include <span>
#include <string>
#include <vector>

#include "options.hpp"

namespace seriema::tools::seriema_run {

// The private directory holding the rendezvous socket; removed (with the socket) when destroyed.
class socket_directory {
 public:
  socket_directory();  // under $TMPDIR, else /tmp; throws seriema::error naming the fix
  ~socket_directory();
  socket_directory(const socket_directory&) = delete;
  socket_directory& operator=(const socket_directory&) = delete;

  const std::string& socket_path() const noexcept { return socket_path_; }

 private:
  std::string dir_;
  std::string socket_path_;
};

// What the rendezvous server asks of the job and tells it.
class rendezvous_events {
 public:
  virtual ~rendezvous_events() = default;
  // How messages name rank `r` ("rank r (pid p)").
  [[nodiscard]] virtual std::string who(int r) const = 0;
  // Rank `r` aborted, or was told that a collective failed: it will report and exit by itself.
  virtual void rank_told_of_failure(int r) = 0;
  // The rendezvous is broken for good (said on stderr already): the job has failed.
  virtual void rendezvous_failed() = 0;
};

class rendezvous_server {
 public:
  // Listens on `socket_path` for the `ranks` ranks; throws seriema::error naming the fix.
  rendezvous_server(const std::string& socket_path, int ranks, rendezvous_events& events);
  ~rendezvous_server();  // closes the connections and the listening socket
  rendezvous_server(const rendezvous_server&) = delete;
  rendezvous_server& operator=(const rendezvous_server&) = delete;

  // The listening socket and the connections, to poll (for writing too while a reply waits).
  void add_poll_fds(std::vector<pollfd>& fds) const;
  // Accepts new connections, then reads and answers whatever arrived on every connection.
  void serve();
  // Rank `r` has exited (`how`: "exited with status 3"; its last messages already served): it
  // can join no further collective, so one it has not joined fails. Returns true when its
  // runtime was up and not finalized: then it has failed whatever its status, which the server
  // says on stderr and tells the other ranks, unless `stopped_by_launcher` (our own signal ended
  // it: the job is ending already).
  bool rank_left(int r, std::string how, bool stopped_by_launcher);
  // When the current collective times out (none while no rank has joined one).
  [[nodiscard]] std::optional<clock_type::time_point> deadline() const {
    return collective_deadline_;
  }
  void check_deadline(clock_type::time_point now);  // fails the collective if it timed out
  [[nodiscard]] bool failed() const { return failed_; }  // a rank aborted or the rendezvous broke

 private:
  // One rank's part in the collectives.
  struct rank_slot {
    bool ever_connected = false;
    bool running = false;    // its runtime said it is up
    bool finalized = false;  // its runtime said it finalized
    std::optional<std::string> left;  // how it ended, once the job said it left
    int joined = 0;  // collectives this rank has contributed to (the current one included)
    std::vector<std::byte> blob;
    std::uint64_t reply_to = 0;  // connection waiting for the current collective's answer; 0: none
  };

  struct connection {
    int fd = -1;
    int rank = -1;  // -1 until its hello
    fabric::launcher_protocol::frame_reader reader;
    std::vector<std::byte> out;
    std::size_t out_done = 0;
    bool closed = false;
  };

  void accept_connections();
  void read_connection(std::uint64_t id, connection& c);
  void close_connections();
  void reject(connection& c, const std::string& why);
  void on_frame(std::uint64_t id, connection& c, fabric::launcher_protocol::frame f);
  void on_hello(connection& c, const fabric::launcher_protocol::hello_message& hello);
  void on_abort(int r, const std::string& why);
  int tell_others_of_failure(int r, const std::string& how);
  void on_contribute(std::uint64_t id, connection& c,
                     fabric::launcher_protocol::contribute_message m);
  void check_pending_collective();
  void on_collective_timeout();
  [[nodiscard]] std::string missing_ranks() const;
  void fail_bootstrap(const std::string& reason);
  void send(connection& c, std::span<const std::byte> frame);
  void flush(connection& c);

  const int ranks_count_;
  rendezvous_events& events_;
  int listen_fd_ = -1;
  std::vector<rank_slot> ranks_;
  std::map<std::uint64_t, connection> connections_;
  std::uint64_t next_connection_id_ = 1;

  // The collective being gathered: the current_-th of every rank.
  int current_ = 1;
  int arrived_ = 0;
  fabric::launcher_protocol::collective_kind kind_ =
      fabric::launcher_protocol::collective_kind::barrier;
  milliseconds collective_timeout_{0};
  std::optional<clock_type::time_point> collective_deadline_;
  std::optional<std::string> failure_;  // why the rendezvous broke; set once
  bool failed_ = false;
};

}  // namespace seriema::tools::seriema_run
