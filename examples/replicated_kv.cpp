// A replicated key-value store on an ordered multicast group: every worker is a replica holding
// the whole store; a put is an ordered call, so every replica applies the puts in one order and
// the copies stay equal; a get reads the local copy. Each replica serves puts of its own keys and
// gets of any key. With --kill, replica 1's process dies halfway: the others install a view
// without it and keep serving; at the end each replica prints a digest of its store, and the
// survivors' digests must be equal.
//   SERIEMA_THREADS=1 seriema-run -n 3 -- ./replicated_kv
//   SERIEMA_THREADS=1 seriema-run -n 3 --on-failure wait -- ./replicated_kv --kill
#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <seriema/fabric/runtime.hpp>
#include <seriema/group/group.hpp>
#include <string>
#include <vector>

using namespace seriema;
using fabric::thread_context;

namespace {

constexpr int puts_per_replica = 400;

// This replica's copy of the store (one replica per worker thread).
thread_local std::map<std::string, std::string> store;

std::uint64_t digest() {
  std::uint64_t h = 1469598103934665603ull;
  for (const auto& [key, value] : store) {
    for (char c : key + "=" + value + ";") h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  }
  return h;
}

thread_local std::size_t done_markers = 0;

// Runs f(args...) at every replica in the group's order; sent again if a view change dropped it
// (a replica died before every other had it).
template <class F, class... Args>
void apply_everywhere(group::group& g, fabric::deadline_clock::time_point deadline,
                      fabric::thread_id me, F f, const Args&... args) {
  while (g.ordered_call_until(deadline, f, args...).wait(deadline) != fabric::outcome::done) {
    if (fabric::deadline_clock::now() > deadline) {
      fmt::print(stderr, "replica {}: an update was not applied\n", me);
      std::exit(1);
    }
  }
}

void serve(thread_context& me, bool kill_one) {
  const auto deadline = fabric::deadline_clock::now() + std::chrono::seconds(60);
  std::vector<fabric::thread_id> replicas(me.thread_count());
  for (fabric::thread_id t = 0; t < replicas.size(); ++t) replicas[t] = t;
  group::group_options options;
  options.max_message = 256;
  options.suspect_after_ms = 1000;
  group::group g = group::group::create(me, replicas, options, deadline);
  g.on_view_change([&](const group::view& v) {
    fmt::print("replica {}: view {}: {} replicas serve on ({} puts of mine dropped)\n", me.id(),
               v.id, v.members.size(), v.trimmed);
  });
  for (int i = 0; i < puts_per_replica; ++i) {
    if (kill_one && me.id() == 1 && i == puts_per_replica / 2) {
      fmt::print("replica 1: dies after {} puts\n", i);
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
    const std::string key = fmt::format("key-{}-{}", me.id(), i % 97);
    const std::string value = fmt::format("value {} from replica {}", i, me.id());
    // A put: applied by every replica, in the group's order.
    apply_everywhere(g, deadline, me.id(),
                     [](const std::string& k, const std::string& v) { store[k] = v; }, key, value);
    // A get: the local copy already has our own put.
    if (store.at(key) != value) {
      fmt::print(stderr, "replica {}: read {} back wrong\n", me.id(), key);
      std::exit(1);
    }
  }
  // The end: a marker in the group's order from each replica; once this replica applied every
  // serving replica's marker, it applied every put they made before it.
  apply_everywhere(g, deadline, me.id(), [](thread_context&) { ++done_markers; });
  me.wait_until([&] { return done_markers >= g.current_view().members.size(); }, deadline);
  fmt::print("replica {}: {} keys, digest {:016x}\n", me.id(), store.size(), digest());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const bool kill_one = argc > 1 && std::strcmp(argv[1], "--kill") == 0;
  fabric::runtime rt;
  try {
    rt.run([&](thread_context& me) { serve(me, kill_one); });
  } catch (const std::exception& e) {
    if (!kill_one) throw;
    // A replica died: the job cannot end collectively; the survivors served and leave.
    std::_Exit(0);
  }
  if (kill_one) std::_Exit(0);
  return 0;
}
