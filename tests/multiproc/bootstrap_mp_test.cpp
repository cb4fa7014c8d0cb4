// Multi-process test of the bootstrap, started N times by seriema-run or mpirun: identity,
// allgather contents and sizes, repeated barriers. `--scenario` selects a failure scenario that
// bootstrap_failure_test drives instead (one rank dies, hangs or aborts during the bootstrap).
//
// usage: bootstrap_mp_test [--np N] [--machines M] [--mode launcher|pmix|single]
//                          [--scenario NAME] [GoogleTest flags]
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <seriema/fabric/bootstrap.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

using seriema::fabric::bootstrap;
using seriema::fabric::bootstrap_error;
using seriema::fabric::bootstrap_mode;
using bytes = std::vector<std::byte>;

struct expectations {
  int np = -1;        // -1: do not check
  int machines = -1;  // -1: do not check
  std::string mode;   // empty: do not check
};

expectations expected;
bootstrap* boot = nullptr;

bytes to_bytes(const std::string& text) {
  bytes out(text.size());
  if (!text.empty()) std::memcpy(out.data(), text.data(), text.size());
  return out;
}

std::string to_string(const bytes& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

bytes int_blob(int value) {
  return to_bytes(std::to_string(value));
}

// Rank r's blob: sizes differ per rank and rank 1's is empty.
std::string blob_of(int r) {
  if (r == 1) return "";
  return "rank-" + std::to_string(r) +
         std::string(static_cast<std::size_t>(r) * 1000, static_cast<char>('a' + r % 26));
}

TEST(bootstrap_mp, identity) {
  ASSERT_NE(boot, nullptr);
  if (!expected.mode.empty()) {
    EXPECT_STREQ(seriema::fabric::to_string(boot->mode()), expected.mode.c_str());
  }
  if (expected.np > 0) {
    EXPECT_EQ(boot->size(), expected.np);
  }
  EXPECT_GE(boot->rank(), 0);
  EXPECT_LT(boot->rank(), boot->size());
  if (expected.machines > 0) {
    EXPECT_EQ(boot->machine_count(), expected.machines);
  }
  EXPECT_EQ(boot->machine(), boot->machine_of(boot->rank()));
  EXPECT_GE(boot->machine(), 0);
  EXPECT_LT(boot->machine(), boot->machine_count());

  if (boot->mode() == bootstrap_mode::launcher) {
    for (int r = 0; r < boot->size(); ++r) {
      EXPECT_EQ(boot->machine_of(r),
                static_cast<int>(static_cast<long long>(r) * boot->machine_count() / boot->size()));
    }
    const char* env_machine = std::getenv("SERIEMA_RUN_MACHINE");
    ASSERT_NE(env_machine, nullptr);
    EXPECT_EQ(std::atoi(env_machine), boot->machine());
  }

  // Ranks are distinct and complete.
  auto ranks = boot->allgather(int_blob(boot->rank()));
  ASSERT_EQ(static_cast<int>(ranks.size()), boot->size());
  for (int r = 0; r < boot->size(); ++r)
    EXPECT_EQ(to_string(ranks[static_cast<std::size_t>(r)]), std::to_string(r));
}

TEST(bootstrap_mp, machines_agree_and_are_numbered_by_lowest_rank) {
  auto machines = boot->allgather(int_blob(boot->machine()));
  int next_new = 0;
  std::set<int> seen;
  for (int r = 0; r < boot->size(); ++r) {
    int m = std::stoi(to_string(machines[static_cast<std::size_t>(r)]));
    EXPECT_EQ(m, boot->machine_of(r)) << "rank " << r;
    if (seen.insert(m).second) {
      EXPECT_EQ(m, next_new) << "machine ids must appear in order of their lowest rank";
      ++next_new;
    }
  }
  EXPECT_EQ(static_cast<int>(seen.size()), boot->machine_count());
}

TEST(bootstrap_mp, allgather_carries_blobs_of_different_sizes) {
  auto all = boot->allgather(to_bytes(blob_of(boot->rank())));
  ASSERT_EQ(static_cast<int>(all.size()), boot->size());
  for (int r = 0; r < boot->size(); ++r) {
    EXPECT_EQ(to_string(all[static_cast<std::size_t>(r)]), blob_of(r)) << "blob of rank " << r;
  }
}

TEST(bootstrap_mp, allgather_of_nothing) {
  auto all = boot->allgather({});
  ASSERT_EQ(static_cast<int>(all.size()), boot->size());
  for (const auto& b : all) EXPECT_TRUE(b.empty());
}

TEST(bootstrap_mp, large_allgather) {
  // Larger than a socket buffer: exercises partial reads and writes on both sides.
  const std::size_t size = 300'000 + static_cast<std::size_t>(boot->rank());
  bytes mine(size);
  for (std::size_t i = 0; i < size; ++i)
    mine[i] = static_cast<std::byte>((i * 7 + static_cast<std::size_t>(boot->rank())) & 0xff);
  auto all = boot->allgather(mine);
  ASSERT_EQ(static_cast<int>(all.size()), boot->size());
  for (int r = 0; r < boot->size(); ++r) {
    const auto& b = all[static_cast<std::size_t>(r)];
    ASSERT_EQ(b.size(), 300'000u + static_cast<std::size_t>(r));
    bool same = true;
    for (std::size_t i = 0; i < b.size() && same; ++i) {
      same = b[i] == static_cast<std::byte>((i * 7 + static_cast<std::size_t>(r)) & 0xff);
    }
    EXPECT_TRUE(same) << "contents of rank " << r;
  }
}

TEST(bootstrap_mp, repeated_barriers_and_allgathers_stay_in_step) {
  for (int i = 0; i < 50; ++i) {
    boot->barrier();
    auto all = boot->allgather(int_blob(i));
    for (const auto& b : all) ASSERT_EQ(to_string(b), std::to_string(i)) << "round " << i;
    boot->barrier();
  }
}

TEST(bootstrap_mp, a_second_bootstrap_object_works_alongside) {
  auto second = bootstrap::create();
  EXPECT_EQ(second->rank(), boot->rank());
  EXPECT_EQ(second->size(), boot->size());
  EXPECT_EQ(second->machine(), boot->machine());
  second->barrier();
  auto all = second->allgather(to_bytes("second-" + std::to_string(second->rank())));
  for (int r = 0; r < second->size(); ++r)
    EXPECT_EQ(to_string(all[static_cast<std::size_t>(r)]), "second-" + std::to_string(r));
  second.reset();
  boot->barrier();
}

// ---- failure scenarios (driven by bootstrap_failure_test) ----

// Runs the survivors' side: one collective of `kind`; reports what happened on stderr.
int survive(bootstrap& b, bool barrier_only) {
  try {
    if (barrier_only) {
      b.barrier();
    } else {
      (void)b.allgather(to_bytes(blob_of(b.rank())));
    }
    std::fprintf(stderr, "[mp rank %d] collective completed\n", b.rank());
    return 0;
  } catch (const bootstrap_error& e) {
    std::fprintf(stderr, "[mp rank %d] caught bootstrap_error: %s\n", b.rank(), e.what());
    return 1;
  }
}

int run_scenario(const std::string& scenario) {
  std::unique_ptr<bootstrap> b;
  try {
    b = bootstrap::create();
  } catch (const seriema::error& e) {
    std::fprintf(stderr, "[mp] bootstrap::create failed: %s\n", e.what());
    return 1;
  }
  const int rank = b->rank();
  const int last = b->size() - 1;
  if (scenario == "exit-before-allgather") {
    if (rank == 1) std::_Exit(3);
    return survive(*b, false);
  }
  if (scenario == "hang-before-allgather") {
    if (rank == 1) {
      for (;;) ::pause();
    }
    return survive(*b, false);
  }
  if (scenario == "signal-before-allgather") {
    if (rank == last) ::raise(SIGKILL);
    return survive(*b, false);
  }
  if (scenario == "abort-before-allgather") {
    if (rank == 1) {
      b->abort("test abort from rank 1");
      std::_Exit(4);
    }
    return survive(*b, false);
  }
  if (scenario == "exit0-before-barrier") {
    if (rank == 1) std::_Exit(0);
    return survive(*b, true);
  }
  if (scenario == "exit-after-bootstrap") {
    // Bootstrap completes; then rank 1 fails on its own while the others finish their work.
    if (survive(*b, false) != 0) return 1;
    if (rank == 1) std::_Exit(3);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    std::fprintf(stderr, "[mp rank %d] done\n", rank);
    return 0;
  }
  if (scenario == "sleep") {
    std::printf("[mp rank %d] pid %d\n", rank, static_cast<int>(::getpid()));
    std::fflush(stdout);
    for (;;) ::pause();
  }
  if (scenario == "print") {
    std::printf("[mp rank %d] hello from rank %d\n[mp rank %d] second line", rank, rank, rank);
    return 0;
  }
  std::fprintf(stderr, "bootstrap_mp_test: unknown --scenario %s\n", scenario.c_str());
  return 2;
}

}  // namespace


int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string scenario;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bootstrap_mp_test: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--np") {
      expected.np = std::stoi(value());
    } else if (arg == "--machines") {
      expected.machines = std::stoi(value());
    } else if (arg == "--mode") {
      expected.mode = value();
    } else if (arg == "--scenario") {
      scenario = value();
    } else {
      std::fprintf(stderr, "bootstrap_mp_test: unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  if (!scenario.empty()) return run_scenario(scenario);

  std::unique_ptr<bootstrap> owner;
  try {
    owner = bootstrap::create();
  } catch (const seriema::error& e) {
    std::fprintf(stderr, "bootstrap_mp_test: %s\n", e.what());
    return 1;
  }
  boot = owner.get();
  int result = RUN_ALL_TESTS();
  try {
    boot->barrier();  // nobody leaves while a peer may still need it
  } catch (const bootstrap_error& e) {
    std::fprintf(stderr, "bootstrap_mp_test: final barrier: %s\n", e.what());
    result = 1;
  }
  return result;
}
