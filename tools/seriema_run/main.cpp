// seriema-run: starts N ranks of a program on this host (optionally as M emulated machines),
// serves their bootstrap rendezvous over a private Unix socket, and turns the failure of any rank
// (a death, or an exit before its runtime finalized) into a prompt, named failure of the whole
// job instead of a hang; --time-limit bounds the whole job. This file holds the job: the event
// loop that joins the process group (process_group.hpp) and the rendezvous server
// (rendezvous_server.hpp); the command line is in cli.hpp.
#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <optional>
#include <seriema/base/error.hpp>
#include <system_error>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "process_group.hpp"
#include "rendezvous_server.hpp"

namespace {

using namespace seriema::tools::seriema_run;

// One run of the job. The group and the server talk only through this class: the group's exits
// go to the server (rank_left), the server's failures to the group (rendezvous_events).
class job final : public rendezvous_events {
 public:
  // Creates the socket directory, prepares the emulated machines and listens, in that order.
  explicit job(run_options options)
      : options_(std::move(options)),
        group_(options_),
        server_(directory_.socket_path(), options_.np, *this) {}

  // Starts the ranks and serves them until the last one exited; returns the job's exit status.
  int run(const std::string& program_path) {
    if (!group_.start(program_path, directory_.socket_path())) return finish();
    if (options_.time_limit) time_limit_at_ = clock_type::now() + *options_.time_limit;
    while (group_.any_running()) {
      wait_for_events();
      auto reaped = group_.reap();
      server_.serve();
      // Deaths are judged after reading every socket: a rank that contributed and then died
      // has its contribution counted, not reported as missing.
      for (int r : reaped) on_rank_exit(r);
      const auto now = clock_type::now();
      server_.check_deadline(now);
      check_time_limit(now);
      group_.check_timers(now);
    }
    group_.drain_output();
    return finish();
  }

 private:
  std::string who(int r) const override { return group_.who(r); }
  void rank_told_of_failure(int r) override { group_.give_grace(r); }
  void rendezvous_failed() override {
    if (options_.kill_on_failure) group_.start_termination();
  }

  // Polls the signals, output pipes and sockets until one is ready or the next timer is due,
  // then writes out the ranks' output and handles the launcher's signals.
  void wait_for_events() {
    std::vector<pollfd> fds;
    group_.add_poll_fds(fds);
    server_.add_poll_fds(fds);
    auto next = group_.next_timer();
    for (auto deadline : {server_.deadline(), time_limit_at_}) {
      if (deadline && (!next || *deadline < *next)) next = deadline;
    }
    int timeout_ms = -1;
    if (next) {
      auto left = std::chrono::ceil<milliseconds>(*next - clock_type::now()).count();
      timeout_ms = static_cast<int>(std::clamp<std::int64_t>(left, 0, 1 << 30));
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      throw seriema::error(fmt::format("poll: {}", std::strerror(errno)));
    }
    group_.pump_output();
    group_.read_signals();
  }

  void on_rank_exit(int r) {
    bool failed = group_.judge_exit(r);
    // A rank that is gone can join no further collective; one that leaves between its runtime's
    // start and its finalize has failed whatever its status (the server tells the others).
    if (server_.rank_left(r, group_.how_it_ended(r), group_.stopped_by_us(r)) && !failed) {
      group_.record_failure(1);  // it exited with status 0
      failed = true;
    }
    if (failed && options_.kill_on_failure) group_.start_termination();
  }

  void check_time_limit(clock_type::time_point now) {
    if (!time_limit_at_ || now < *time_limit_at_) return;
    time_limit_at_.reset();
    const auto limit = *options_.time_limit;
    group_.stop_at_time_limit(limit.count() % 1000 == 0
                                  ? fmt::format("{}s", limit.count() / 1000)
                                  : fmt::format("{}ms", limit.count()));
  }

  int finish() const {
    int code = group_.exit_code().value_or(server_.failed() ? 1 : 0);
    if (code != 0 && code != exit_usage) {
      fmt::print(stderr, "seriema-run: job failed; exiting with status {}\n", code);
    }
    return code;
  }

  run_options options_;
  socket_directory directory_;  // first: the server listens in it, the ranks are told of it
  process_group group_;
  rendezvous_server server_;
  std::optional<clock_type::time_point> time_limit_at_;  // --time-limit, until it passed
};

}  // namespace

int main(int argc, char** argv) {
  run_options options;
  if (auto code = parse_command_line(argc, argv, options)) return *code;

  std::string program_path;
  try {
    program_path = resolve_program(options.command[0]);
  } catch (const std::system_error& e) {
    fmt::print(stderr, "seriema-run: cannot execute {}: {}\n", options.command[0],
               std::strerror(e.code().value()));
    return exit_cannot_execute;
  }

  try {
    job the_job(std::move(options));
    return the_job.run(program_path);
  } catch (const std::exception& e) {
    fmt::print(stderr, "seriema-run: {}\n", e.what());
    return 1;
  }
}
