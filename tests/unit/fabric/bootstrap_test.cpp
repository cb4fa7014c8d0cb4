// Unit tests of the bootstrap in one process: single mode, mode detection, machine assignment,
// the seriema-run wire format (including malformed input), and the launcher client against a
// scripted fake launcher (results, failures, a vanished or silent launcher, bad variables).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <seriema/fabric/bootstrap.hpp>
#include <string>
#include <thread>
#include <vector>

#include <seriema/fabric/detail/launcher_protocol.hpp>

namespace {

using namespace seriema::fabric;
namespace proto = seriema::fabric::launcher_protocol;
using bytes = std::vector<std::byte>;

bytes to_bytes(std::string_view text) {
  bytes out(text.size());
  if (!text.empty()) std::memcpy(out.data(), text.data(), text.size());
  return out;
}

std::string to_string(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// Sets environment variables for one test and restores the previous values afterwards.
class scoped_env {
 public:
  scoped_env(std::initializer_list<std::pair<const char*, std::optional<std::string>>> values) {
    for (const auto& [name, value] : values) set(name, value);
  }
  void set(const char* name, const std::optional<std::string>& value) {
    if (!saved_.contains(name)) {
      const char* old = std::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~scoped_env() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// No launcher variables at all: the default for tests that need single mode.
scoped_env no_launcher() {
  return scoped_env{{"PMIX_RANK", std::nullopt},
                    {"PMIX_NAMESPACE", std::nullopt},
                    {"SERIEMA_RUN_SOCKET", std::nullopt},
                    {"SERIEMA_BOOTSTRAP_TIMEOUT", std::nullopt}};
}

// ---- single mode and detection ----

TEST(bootstrap_single, is_rank_zero_of_one_with_trivial_collectives) {
  auto env = no_launcher();
  EXPECT_EQ(bootstrap::detect_mode(), bootstrap_mode::single);
  auto b = bootstrap::create();
  EXPECT_EQ(b->mode(), bootstrap_mode::single);
  EXPECT_EQ(b->rank(), 0);
  EXPECT_EQ(b->size(), 1);
  EXPECT_EQ(b->machine(), 0);
  EXPECT_EQ(b->machine_count(), 1);
  EXPECT_EQ(b->machine_of(0), 0);
  auto all = b->allgather(to_bytes("hello"));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(to_string(all[0]), "hello");
  EXPECT_TRUE(b->allgather({})[0].empty());
  b->barrier();
  b->barrier();
}

TEST(bootstrap_single, detects_modes_from_the_environment) {
  auto env = no_launcher();
  env.set("SERIEMA_RUN_SOCKET", "/nonexistent/socket");
  EXPECT_EQ(bootstrap::detect_mode(), bootstrap_mode::launcher);
  env.set("PMIX_RANK", "0");
  EXPECT_EQ(bootstrap::detect_mode(), bootstrap_mode::launcher) << "PMIX_NAMESPACE is missing";
  env.set("PMIX_NAMESPACE", "job");
  EXPECT_EQ(bootstrap::detect_mode(), bootstrap_mode::pmix);
  EXPECT_STREQ(to_string(bootstrap_mode::pmix), "pmix");
  EXPECT_STREQ(to_string(bootstrap_mode::launcher), "seriema-run");
  EXPECT_STREQ(to_string(bootstrap_mode::single), "single");
}

TEST(bootstrap_single, rejects_a_bad_timeout_setting) {
  auto env = no_launcher();
  env.set("SERIEMA_BOOTSTRAP_TIMEOUT", "soon");
  EXPECT_THROW(bootstrap::create(), seriema::config_error);
  env.set("SERIEMA_BOOTSTRAP_TIMEOUT", "0");
  EXPECT_THROW(bootstrap::create(), seriema::config_error);
}

// ---- machine assignment ----

TEST(machine_assignment, examples) {
  std::vector<int> four_on_two;
  for (int r = 0; r < 4; ++r) four_on_two.push_back(proto::machine_of_rank(r, 4, 2));
  EXPECT_EQ(four_on_two, (std::vector<int>{0, 0, 1, 1}));
  std::vector<int> five_on_two;
  for (int r = 0; r < 5; ++r) five_on_two.push_back(proto::machine_of_rank(r, 5, 2));
  EXPECT_EQ(five_on_two, (std::vector<int>{0, 0, 0, 1, 1}));
  EXPECT_EQ(proto::machine_of_rank(0, 1, 1), 0);
  EXPECT_EQ(proto::machine_of_rank(2, 3, 3), 2);
}

TEST(machine_assignment, contiguous_balanced_and_numbered_by_lowest_rank) {
  for (int n = 1; n <= 40; ++n) {
    for (int m = 1; m <= n; ++m) {
      std::vector<int> count(static_cast<std::size_t>(m), 0);
      int previous = 0;
      for (int r = 0; r < n; ++r) {
        int machine = proto::machine_of_rank(r, n, m);
        ASSERT_GE(machine, 0);
        ASSERT_LT(machine, m);
        ASSERT_TRUE(machine == previous || machine == previous + 1) << n << " " << m << " " << r;
        if (r == 0) {
          ASSERT_EQ(machine, 0);
        }
        previous = machine;
        ++count[static_cast<std::size_t>(machine)];
      }
      for (int c : count) {
        ASSERT_GE(c, n / m) << "n=" << n << " m=" << m;
        ASSERT_LE(c, (n + m - 1) / m) << "n=" << n << " m=" << m;
      }
    }
  }
  EXPECT_EQ(proto::machine_of_rank(1 << 30, (1 << 30) + 1, 1 << 29), (1 << 29) - 1);  // no overflow
}

TEST(machine_assignment, job_shape_is_checked) {
  EXPECT_NO_THROW(proto::check_job_shape(4, 2));
  EXPECT_NO_THROW(proto::check_job_shape(1, 1));
  EXPECT_THROW(proto::check_job_shape(0, 1), bootstrap_error);
  EXPECT_THROW(proto::check_job_shape(2, 3), bootstrap_error);
  EXPECT_THROW(proto::check_job_shape(2, 0), bootstrap_error);
}

// ---- wire format ----

// Feeds a whole encoded frame through a reader and returns the frame.
proto::frame read_back(const bytes& encoded) {
  proto::frame_reader reader;
  reader.feed(encoded);
  auto f = reader.next();
  EXPECT_TRUE(f.has_value());
  EXPECT_FALSE(reader.mid_frame());
  return f ? std::move(*f) : proto::frame{};
}

TEST(launcher_protocol, round_trips_every_message) {
  auto hello = read_back(proto::encode_hello({3, 4242}));
  ASSERT_EQ(hello.type, proto::message_type::hello);
  auto h = proto::decode_hello(hello.payload);
  EXPECT_EQ(h.rank, 3);
  EXPECT_EQ(h.pid, 4242);

  auto contribute = read_back(
      proto::encode_contribute(proto::collective_kind::allgather, 5000, to_bytes("rank-3")));
  ASSERT_EQ(contribute.type, proto::message_type::contribute);
  auto c = proto::decode_contribute(contribute.payload);
  EXPECT_EQ(c.kind, proto::collective_kind::allgather);
  EXPECT_EQ(c.timeout_ms, 5000u);
  EXPECT_EQ(to_string(c.blob), "rank-3");

  auto barrier = proto::decode_contribute(
      read_back(proto::encode_contribute(proto::collective_kind::barrier, 1, {})).payload);
  EXPECT_EQ(barrier.kind, proto::collective_kind::barrier);
  EXPECT_TRUE(barrier.blob.empty());

  std::vector<bytes> blobs = {to_bytes("rank-0"), {}, to_bytes(std::string(5000, 'x'))};
  auto result = read_back(proto::encode_result(blobs));
  ASSERT_EQ(result.type, proto::message_type::result);
  EXPECT_EQ(proto::decode_result(result.payload, 3), blobs);

  auto failure = read_back(proto::encode_failure("rank 1 (pid 7) exited with status 3"));
  ASSERT_EQ(failure.type, proto::message_type::failure);
  EXPECT_EQ(proto::decode_text(failure.payload), "rank 1 (pid 7) exited with status 3");

  auto abort = read_back(proto::encode_abort("out of memory"));
  ASSERT_EQ(abort.type, proto::message_type::abort);
  EXPECT_EQ(proto::decode_text(abort.payload), "out of memory");

  EXPECT_EQ(read_back(proto::encode_running()).type, proto::message_type::running);
  EXPECT_EQ(read_back(proto::encode_finalized()).type, proto::message_type::finalized);
  auto left = read_back(proto::encode_rank_failed(5, "exited with status 0 before finalize"));
  ASSERT_EQ(left.type, proto::message_type::rank_failed);
  auto l = proto::decode_rank_failed(left.payload);
  EXPECT_EQ(l.rank, 5);
  EXPECT_EQ(l.how, "exited with status 0 before finalize");
}

TEST(launcher_protocol, reader_reassembles_frames_fed_byte_by_byte) {
  bytes stream = proto::encode_hello({1, 99});
  auto second = proto::encode_contribute(proto::collective_kind::allgather, 7, to_bytes("abc"));
  stream.insert(stream.end(), second.begin(), second.end());
  proto::frame_reader reader;
  std::vector<proto::frame> frames;
  for (std::byte b : stream) {
    reader.feed(std::span<const std::byte>(&b, 1));
    while (auto f = reader.next()) frames.push_back(std::move(*f));
  }
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].type, proto::message_type::hello);
  EXPECT_EQ(frames[1].type, proto::message_type::contribute);
  EXPECT_EQ(to_string(proto::decode_contribute(frames[1].payload).blob), "abc");
  EXPECT_FALSE(reader.mid_frame());
}

bytes header(std::uint32_t type, std::uint32_t length) {
  bytes out;
  for (std::uint32_t v : {type, length}) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
  }
  return out;
}

void expect_bad_header(std::uint32_t type, std::uint32_t length) {
  proto::frame_reader reader;
  reader.feed(header(type, length));
  EXPECT_THROW(reader.next(), proto::protocol_error) << "type " << type << " length " << length;
}

TEST(launcher_protocol, rejects_bad_headers_before_buffering_the_payload) {
  expect_bad_header(0, 0);                             // unknown type
  expect_bad_header(99, 4);                            // unknown type
  expect_bad_header(1, 7);                             // hello is 8 bytes
  expect_bad_header(2, 4);                             // contribution needs kind + timeout
  expect_bad_header(2, proto::max_payload_bytes + 1);  // too long
  expect_bad_header(4, 3);                             // result needs a count
  expect_bad_header(4, 0xffffffffu);                   // too long
  expect_bad_header(5, proto::max_text_bytes + 1);     // text too long
  expect_bad_header(6, 1);                             // running has no payload
  expect_bad_header(7, 4);                             // finalized has no payload
  expect_bad_header(8, 3);                             // a rank failure needs the rank
  expect_bad_header(8, proto::max_text_bytes + 5);     // text too long
  // A header alone is not a frame yet, and an incomplete header is just "need more".
  proto::frame_reader reader;
  reader.feed(header(5, 10));
  EXPECT_FALSE(reader.next().has_value());
  EXPECT_TRUE(reader.mid_frame());
  proto::frame_reader partial;
  partial.feed(bytes(3, std::byte{0xff}));
  EXPECT_FALSE(partial.next().has_value());
}

TEST(launcher_protocol, rejects_malformed_payloads) {
  auto payload_of = [](const bytes& frame) { return bytes(frame.begin() + 8, frame.end()); };
  // Hello: negative rank.
  auto hello = payload_of(proto::encode_hello({0, 1}));
  hello[3] = std::byte{0x80};
  EXPECT_THROW(proto::decode_hello(hello), proto::protocol_error);
  EXPECT_THROW(proto::decode_hello(bytes(7)), proto::protocol_error);
  // Contribution: unknown kind; a barrier with data; truncated.
  auto contribution =
      payload_of(proto::encode_contribute(proto::collective_kind::allgather, 1, {}));
  contribution[0] = std::byte{7};
  EXPECT_THROW(proto::decode_contribute(contribution), proto::protocol_error);
  auto barrier =
      payload_of(proto::encode_contribute(proto::collective_kind::allgather, 1, to_bytes("x")));
  barrier[0] = static_cast<std::byte>(proto::collective_kind::barrier);
  EXPECT_THROW(proto::decode_contribute(barrier), proto::protocol_error);
  EXPECT_THROW(proto::decode_contribute(bytes(4)), proto::protocol_error);
  // Result: wrong count, impossible count, blob longer than the payload, trailing bytes.
  std::vector<bytes> blobs = {to_bytes("a"), to_bytes("bc")};
  auto result = payload_of(proto::encode_result(blobs));
  EXPECT_THROW(proto::decode_result(result, 3), proto::protocol_error);
  auto huge_count = result;
  huge_count[3] = std::byte{0x7f};
  EXPECT_THROW(proto::decode_result(huge_count, 0x7f000002), proto::protocol_error);
  auto long_blob = result;
  long_blob[4] = std::byte{0xff};  // first blob claims 255 bytes
  EXPECT_THROW(proto::decode_result(long_blob, 2), proto::protocol_error);
  auto trailing = result;
  trailing.push_back(std::byte{0});
  EXPECT_THROW(proto::decode_result(trailing, 2), proto::protocol_error);
  auto truncated = result;
  truncated.pop_back();
  EXPECT_THROW(proto::decode_result(truncated, 2), proto::protocol_error);
  EXPECT_EQ(proto::decode_result(result, 2), blobs);
  // Rank failure: a negative rank.
  auto left = payload_of(proto::encode_rank_failed(1, "gone"));
  left[3] = std::byte{0x80};
  EXPECT_THROW(proto::decode_rank_failed(left), proto::protocol_error);
}

// ---- the launcher client against a scripted fake launcher ----

// A Unix socket in a private directory, served by one thread running `script` on the accepted
// connection. The script talks raw frames, like seriema-run would.
class fake_launcher {
 public:
  using script = std::function<void(int fd)>;

  explicit fake_launcher(script s) {
    char dir[] = "/tmp/bootstrap_test.XXXXXX";
    EXPECT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/socket";
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path_.c_str(), sizeof(address.sun_path) - 1);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(::listen(listen_fd_, 4), 0);
    thread_ = std::thread([this, s = std::move(s)] {
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      s(fd);
      ::close(fd);
    });
  }
  ~fake_launcher() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    ::close(listen_fd_);
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }

  // Blocking read of the next frame; nullopt at end of stream.
  static std::optional<proto::frame> read_frame(int fd, proto::frame_reader& reader) {
    std::byte buffer[4096];
    for (;;) {
      if (auto f = reader.next()) return f;
      ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n <= 0) return std::nullopt;
      reader.feed(std::span<const std::byte>(buffer, static_cast<std::size_t>(n)));
    }
  }
  static void write_frame(int fd, const bytes& frame) {
    ASSERT_EQ(::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(frame.size()));
  }

 private:
  std::string dir_;
  std::string path_;
  int listen_fd_ = -1;
  std::thread thread_;
};

scoped_env launcher_env(const std::string& socket, int rank, int size, int machines = 1) {
  return scoped_env{
      {"PMIX_RANK", std::nullopt},
      {"PMIX_NAMESPACE", std::nullopt},
      {"SERIEMA_BOOTSTRAP_TIMEOUT", std::nullopt},
      {"SERIEMA_RUN_SOCKET", socket},
      {"SERIEMA_RUN_RANK", std::to_string(rank)},
      {"SERIEMA_RUN_SIZE", std::to_string(size)},
      {"SERIEMA_RUN_MACHINES", std::to_string(machines)},
      {"SERIEMA_RUN_MACHINE", std::to_string(proto::machine_of_rank(rank, size, machines))}};
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const bootstrap_error& e) {
    return e.what();
  }
  return "(no bootstrap_error)";
}

TEST(launcher_client, allgather_and_barrier_are_served_by_the_launcher) {
  std::vector<proto::frame> seen;
  fake_launcher launcher([&](int fd) {
    proto::frame_reader reader;
    seen.push_back(*fake_launcher::read_frame(fd, reader));  // hello
    seen.push_back(*fake_launcher::read_frame(fd, reader));  // allgather
    fake_launcher::write_frame(
        fd, proto::encode_result(std::vector<bytes>{to_bytes("zero"), to_bytes("one")}));
    seen.push_back(*fake_launcher::read_frame(fd, reader));  // barrier
    fake_launcher::write_frame(fd, proto::encode_result(std::vector<bytes>{{}, {}}));
  });
  auto env = launcher_env(launcher.path(), 1, 2, 2);
  auto b = bootstrap::create({std::chrono::milliseconds(3000)});
  EXPECT_EQ(b->mode(), bootstrap_mode::launcher);
  EXPECT_EQ(b->rank(), 1);
  EXPECT_EQ(b->size(), 2);
  EXPECT_EQ(b->machine(), 1);
  EXPECT_EQ(b->machine_count(), 2);
  EXPECT_EQ(b->machine_of(0), 0);
  auto all = b->allgather(to_bytes("one"));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(to_string(all[0]), "zero");
  EXPECT_EQ(to_string(all[1]), "one");
  b->barrier();
  b.reset();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(proto::decode_hello(seen[0].payload).rank, 1);
  EXPECT_EQ(proto::decode_hello(seen[0].payload).pid, static_cast<int>(::getpid()));
  auto c = proto::decode_contribute(seen[1].payload);
  EXPECT_EQ(c.kind, proto::collective_kind::allgather);
  EXPECT_EQ(c.timeout_ms, 3000u);
  EXPECT_EQ(to_string(c.blob), "one");
  EXPECT_EQ(proto::decode_contribute(seen[2].payload).kind, proto::collective_kind::barrier);
}

TEST(launcher_client, a_failure_from_the_launcher_is_thrown_and_sticks) {
  const std::string why =
      "seriema: bootstrap failed: rank 0 (pid 4242) exited with status 3 before joining the "
      "allgather";
  fake_launcher launcher([&](int fd) {
    proto::frame_reader reader;
    (void)fake_launcher::read_frame(fd, reader);
    (void)fake_launcher::read_frame(fd, reader);
    fake_launcher::write_frame(fd, proto::encode_failure(why));
  });
  auto env = launcher_env(launcher.path(), 1, 2);
  auto b = bootstrap::create();
  EXPECT_EQ(message_of([&] { b->allgather(to_bytes("x")); }), why);
  EXPECT_EQ(message_of([&] { b->barrier(); }), why);
}

TEST(launcher_client, tells_its_lifecycle_and_hears_of_ranks_that_left) {
  std::vector<proto::message_type> seen;
  std::optional<fake_launcher> launcher;
  launcher.emplace([&](int fd) {
    proto::frame_reader reader;
    seen.push_back(fake_launcher::read_frame(fd, reader)->type);  // hello
    seen.push_back(fake_launcher::read_frame(fd, reader)->type);  // running
    // One notice perhaps before the handler is installed, one while a collective waits; one
    // naming the rank itself and one naming no rank of the job, both ignored.
    fake_launcher::write_frame(fd, proto::encode_rank_failed(2, "exited with status 0 before "
                                                                "finalize"));
    seen.push_back(fake_launcher::read_frame(fd, reader)->type);  // barrier
    fake_launcher::write_frame(fd, proto::encode_rank_failed(0, "itself"));
    fake_launcher::write_frame(fd, proto::encode_rank_failed(9, "no such rank"));
    fake_launcher::write_frame(fd, proto::encode_rank_failed(3, "killed by signal 9 (SIGKILL) "
                                                                "before finalize"));
    fake_launcher::write_frame(fd, proto::encode_result(std::vector<bytes>(4)));
    seen.push_back(fake_launcher::read_frame(fd, reader)->type);  // finalized
  });
  auto env = launcher_env(launcher->path(), 0, 4);
  auto b = bootstrap::create();
  b->mark_running();
  std::mutex mutex;
  std::vector<std::pair<int, std::string>> heard;
  b->watch_peers([&](int rank, const std::string& how) {
    std::lock_guard lock(mutex);
    heard.emplace_back(rank, how);
  });
  b->barrier();  // the notices sent before its answer were handled before it returned
  b->mark_finalized();
  b->watch_peers(nullptr);
  b.reset();
  launcher.reset();  // its script has read everything the client sent
  std::lock_guard lock(mutex);
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[0], std::make_pair(2, std::string("seriema-run: exited with status 0 before "
                                                    "finalize")));
  EXPECT_EQ(heard[1], std::make_pair(3, std::string("seriema-run: killed by signal 9 (SIGKILL) "
                                                    "before finalize")));
  EXPECT_EQ(seen, (std::vector<proto::message_type>{
                      proto::message_type::hello, proto::message_type::running,
                      proto::message_type::contribute, proto::message_type::finalized}));
}

TEST(launcher_client, a_vanished_launcher_is_named) {
  fake_launcher launcher([&](int fd) {
    proto::frame_reader reader;
    (void)fake_launcher::read_frame(fd, reader);
    (void)fake_launcher::read_frame(fd, reader);
  });
  auto env = launcher_env(launcher.path(), 0, 2);
  auto b = bootstrap::create();
  auto message = message_of([&] { b->barrier(); });
  EXPECT_NE(message.find("seriema-run went away"), std::string::npos) << message;
  EXPECT_NE(message.find("barrier"), std::string::npos) << message;
}

TEST(launcher_client, a_silent_launcher_times_out) {
  fake_launcher launcher([&](int fd) {
    proto::frame_reader reader;
    (void)fake_launcher::read_frame(fd, reader);
    (void)fake_launcher::read_frame(fd, reader);
    (void)fake_launcher::read_frame(fd, reader);  // until the client closes
  });
  auto env = launcher_env(launcher.path(), 0, 2);
  auto b = bootstrap::create({std::chrono::milliseconds(100)});
  auto message = message_of([&] { b->allgather({}); });
  EXPECT_NE(message.find("did not answer"), std::string::npos) << message;
  b.reset();  // closes the socket, ending the script
}

TEST(launcher_client, a_malformed_answer_is_an_error) {
  fake_launcher launcher([&](int fd) {
    proto::frame_reader reader;
    (void)fake_launcher::read_frame(fd, reader);
    (void)fake_launcher::read_frame(fd, reader);
    fake_launcher::write_frame(fd,
                               proto::encode_result(std::vector<bytes>{{}}));  // 1 blob for 2 ranks
  });
  auto env = launcher_env(launcher.path(), 0, 2);
  auto b = bootstrap::create();
  auto message = message_of([&] { b->allgather({}); });
  EXPECT_NE(message.find("result holds 1 blobs for a job of 2 ranks"), std::string::npos)
      << message;
}

TEST(launcher_client, bad_variables_name_the_variable_and_the_fix) {
  auto env = launcher_env("/nonexistent/seriema-run.sock", 0, 2);
  auto unreachable = message_of([] { bootstrap::create(); });
  EXPECT_NE(
      unreachable.find(
          "cannot connect to seriema-run at SERIEMA_RUN_SOCKET=/nonexistent/seriema-run.sock"),
      std::string::npos)
      << unreachable;
  EXPECT_NE(unreachable.find("unset SERIEMA_RUN_SOCKET"), std::string::npos) << unreachable;

  env.set("SERIEMA_RUN_RANK", std::nullopt);
  auto no_rank = message_of([] { bootstrap::create(); });
  EXPECT_NE(no_rank.find("SERIEMA_RUN_RANK is not"), std::string::npos) << no_rank;

  env.set("SERIEMA_RUN_RANK", "2");
  auto out_of_range = message_of([] { bootstrap::create(); });
  EXPECT_NE(out_of_range.find("SERIEMA_RUN_RANK=2 is out of range"), std::string::npos)
      << out_of_range;

  env.set("SERIEMA_RUN_RANK", "1");
  env.set("SERIEMA_RUN_MACHINES", "2");
  env.set("SERIEMA_RUN_MACHINE", "0");
  auto wrong_machine = message_of([] { bootstrap::create(); });
  EXPECT_NE(wrong_machine.find(
                "SERIEMA_RUN_MACHINE=0 but rank 1 of 2 on 2 machines belongs to machine 1"),
            std::string::npos)
      << wrong_machine;
}

}  // namespace
