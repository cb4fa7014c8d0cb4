// The connected components of an R-MAT graph (the Graph500 generator's parameters: A = 0.57,
// B = C = 0.19, 16 edges per vertex) with a distributed disjoint_set: every thread generates its
// share of the edges and unites their ends, keeping the edges that merged two components (a
// spanning forest) with unite_and_run; compress() points every vertex at its component's root,
// and thread 0 checks every vertex's root against a sequential union-find of the same edges.
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./connected_components [scale, default 14]
#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
#include <numeric>
#include <stdexcept>
#include <seriema/containers/containers.hpp>
#include <seriema/fabric/runtime.hpp>
#include <string>
#include <utility>
#include <vector>

using seriema::fabric::thread_context;
namespace containers = seriema::containers;
using vertex_sets = containers::disjoint_set<std::uint64_t>;

namespace {

constexpr std::uint64_t edge_factor = 16;

// splitmix64: the random stream of edge e is a pure function of e, so any thread (and the
// sequential check) makes the same edge.
std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Edge e of an R-MAT graph of 2^scale vertices (as examples/degree_histogram.cpp makes them).
std::pair<std::uint64_t, std::uint64_t> rmat_edge(int scale, std::uint64_t e) {
  std::uint64_t u = 0, v = 0, state = mix64(e);
  for (int level = 0; level < scale; ++level) {
    state = mix64(state);
    const double p = static_cast<double>(state >> 11) * 0x1.0p-53;
    const std::uint64_t row = p >= 0.57 + 0.19 ? 1 : 0;
    const std::uint64_t col = (p >= 0.57 && p < 0.76) || p >= 0.95 ? 1 : 0;
    u = (u << 1) | row;
    v = (v << 1) | col;
  }
  return {u, v};
}

// The spanning forest edges found at each worker of this process (unite_and_run's action runs
// at the worker where two components merged, and counts there: each entry has one writer).
constexpr std::uint64_t most_workers = 1024;
std::array<std::uint64_t, most_workers> forest_edges_at{};

// Every vertex that is an edge's end -> the root of its component, sequentially: union-find with
// the disjoint_set's order (a set's root is its first vertex in that order).
std::map<std::uint64_t, std::uint64_t> sequential_roots(int scale, std::uint64_t edges) {
  std::vector<std::uint64_t> parent(std::uint64_t{1} << scale);
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<bool> seen(parent.size());
  auto root = [&](std::uint64_t v) {
    while (parent[v] != v) v = parent[v] = parent[parent[v]];
    return v;
  };
  for (std::uint64_t e = 0; e < edges; ++e) {
    const auto [u, v] = rmat_edge(scale, e);
    if (u == v) continue;  // a loop names no other vertex: the disjoint_set never sees it
    seen[u] = seen[v] = true;
    const std::uint64_t ru = root(u), rv = root(v);
    if (ru != rv) vertex_sets::before(ru, rv) ? parent[rv] = ru : parent[ru] = rv;
  }
  std::map<std::uint64_t, std::uint64_t> roots;
  for (std::uint64_t v = 0; v < parent.size(); ++v) {
    if (seen[v]) roots[v] = root(v);
  }
  return roots;
}

}  // namespace

int main(int argc, char** argv) try {
  const int scale = argc > 1 ? std::stoi(argv[1]) : 14;
  if (scale < 2 || scale > 30) throw std::invalid_argument("scale: 2..30");
  const std::uint64_t edges = edge_factor << scale;
  seriema::fabric::runtime rt;
  bool matches = true;
  rt.run([&](thread_context& me) {
    if (me.thread_count() > most_workers) throw std::invalid_argument("at most 1024 workers");
    forest_edges_at[me.id()] = 0;
    vertex_sets components(me);
    for (std::uint64_t e = me.id(); e < edges; e += me.thread_count()) {
      const auto [u, v] = rmat_edge(scale, e);
      (void)components.unite_and_run(u, v, [](vertex_sets& at, std::uint64_t, std::uint64_t) {
        ++forest_edges_at[at.self().id()];
      });
    }
    components.compress();
    containers::array<std::uint64_t> forest(me, me.thread_count(),
                                            containers::distribution::cyclic);
    forest.local()[0] = forest_edges_at[me.id()];
    forest.barrier();
    if (me.id() == 0) {
      const auto expected = sequential_roots(scale, edges);
      std::map<std::uint64_t, std::uint64_t> roots;
      for (const auto& [v, root] : components.gather()) roots[v] = root;
      const std::uint64_t sets = components.set_count();
      std::map<std::uint64_t, std::uint64_t> sizes;  // root -> vertices
      for (const auto& [v, root] : roots) ++sizes[root];
      std::uint64_t largest = 0, forest_edges = 0;
      for (const auto& [root, n] : sizes) largest = std::max(largest, n);
      for (std::uint64_t n : forest.gather()) forest_edges += n;
      matches = roots == expected && sets == sizes.size() && forest_edges == roots.size() - sets;
      fmt::print("connected_components: R-MAT scale {} ({} edges) over {} threads: {} vertices "
                 "with edges in {} components, the largest of {} vertices; {} spanning forest "
                 "edges\n",
                 scale, edges, me.thread_count(), roots.size(), sets, largest, forest_edges);
      fmt::print("connected_components: {} the sequential union-find\n",
                 matches ? "matches" : "DIFFERS FROM");
    }
    forest.barrier();  // thread 0 asked every part: nobody leaves before
  });
  return matches ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "connected_components: %s\n", e.what());
  return 1;
}
