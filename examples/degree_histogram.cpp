// The degree histogram of an R-MAT graph (the Graph500 generator's parameters: A = 0.57,
// B = C = 0.19, 16 edges per vertex) with two distributed containers: every thread generates its
// share of the edges and adds 1 to both ends' degrees in an array; then every owner counts its
// vertices' degrees into a counting_set (degree -> vertices), and thread 0 prints the histogram
// and checks it against a sequential computation of the same edges.
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./degree_histogram [scale, default 14]
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <seriema/containers/containers.hpp>
#include <seriema/fabric/runtime.hpp>
#include <string>
#include <utility>
#include <vector>

using seriema::fabric::thread_context;

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

// Edge e of an R-MAT graph of 2^scale vertices: at each level the edge falls in one quadrant of
// the adjacency matrix with probabilities A, B, C, D = 0.57, 0.19, 0.19, 0.05.
std::pair<std::uint64_t, std::uint64_t> rmat_edge(int scale, std::uint64_t e) {
  std::uint64_t u = 0, v = 0, state = mix64(e);
  for (int level = 0; level < scale; ++level) {
    state = mix64(state);
    const double p = static_cast<double>(state >> 11) * 0x1.0p-53;
    const std::uint64_t row = p >= 0.57 + 0.19 ? 1 : 0;                  // C or D
    const std::uint64_t col = (p >= 0.57 && p < 0.76) || p >= 0.95 ? 1 : 0;  // B or D
    u = (u << 1) | row;
    v = (v << 1) | col;
  }
  return {u, v};
}

}  // namespace

int main(int argc, char** argv) try {
  const int scale = argc > 1 ? std::stoi(argv[1]) : 14;
  if (scale < 2 || scale > 30) throw std::invalid_argument("scale: 2..30");
  const std::uint64_t vertices = std::uint64_t{1} << scale, edges = edge_factor * vertices;
  seriema::fabric::runtime rt;
  bool matches = true;
  rt.run([&](thread_context& me) {
    namespace containers = seriema::containers;
    containers::array<std::uint64_t> degree(me, vertices);
    for (std::uint64_t e = me.id(); e < edges; e += me.thread_count()) {
      const auto [u, v] = rmat_edge(scale, e);
      (void)degree.add(u, 1);
      (void)degree.add(v, 1);
    }
    degree.barrier();
    containers::counting_set<std::uint64_t> histogram(me);  // degree -> how many vertices
    for (std::uint64_t d : degree.local()) (void)histogram.insert(d);
    histogram.barrier();
    if (me.id() == 0) {
      std::vector<std::uint64_t> sequential_degree(vertices);
      for (std::uint64_t e = 0; e < edges; ++e) {
        const auto [u, v] = rmat_edge(scale, e);
        ++sequential_degree[u];
        ++sequential_degree[v];
      }
      std::map<std::uint64_t, std::uint64_t> sequential;
      for (std::uint64_t d : sequential_degree) ++sequential[d];
      auto counted = histogram.gather();
      std::sort(counted.begin(), counted.end());
      matches = counted == std::vector<std::pair<std::uint64_t, std::uint64_t>>(
                               sequential.begin(), sequential.end());
      fmt::print("degree_histogram: R-MAT scale {} ({} vertices, {} edges) over {} threads: "
                 "{} distinct degrees, {} isolated vertices, largest degree {}\n",
                 scale, vertices, edges, me.thread_count(), counted.size(),
                 sequential.count(0) != 0 ? sequential[0] : 0, counted.back().first);
      for (std::size_t i = 1; i < counted.size(); i = i * 2) {
        fmt::print("  degree {:>6}: {:>6} vertices\n", counted[i].first, counted[i].second);
      }
      fmt::print("degree_histogram: {} the sequential computation\n",
                 matches ? "matches" : "DIFFERS FROM");
    }
    histogram.barrier();  // thread 0 asked every part: nobody leaves before
  });
  return matches ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "degree_histogram: %s\n", e.what());
  return 1;
}
