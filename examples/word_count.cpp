// Word count with a distributed counting set: every thread of the job reads its share of the
// files, counts their words into one containers::counting_set (repeated words are merged at the
// sender before they travel), and thread 0 prints the most frequent ones and checks every count
// against a sequential count of the same files.
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./word_count [files...]
// Without files it counts the license texts every Debian system has (/usr/share/common-licenses).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <seriema/containers/containers.hpp>
#include <seriema/fabric/runtime.hpp>
#include <string>
#include <vector>

using seriema::fabric::thread_context;

namespace {

// Runs f(word) for every word of `path`: lowercase runs of letters and digits.
template <class F>
void for_each_word(const std::string& path, F f) {
  std::ifstream in(path, std::ios::binary);
  std::string word;
  char c;
  while (in.get(c)) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      f(word);
      word.clear();
    }
  }
  if (!word.empty()) f(word);
}

std::vector<std::string> input_files(int argc, char** argv) {
  std::vector<std::string> files(argv + 1, argv + argc);
  if (files.empty()) {
    for (const auto& entry : std::filesystem::directory_iterator("/usr/share/common-licenses")) {
      if (entry.is_regular_file()) files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());  // every process sees the same order
  return files;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::vector<std::string> files = input_files(argc, argv);
  seriema::fabric::runtime rt;
  bool matches = true;
  rt.run([&](thread_context& me) {
    seriema::containers::counting_set<std::string> words(me);
    for (std::size_t f = me.id(); f < files.size(); f += me.thread_count()) {
      for_each_word(files[f], [&](const std::string& word) { (void)words.insert(word); });
    }
    words.barrier();  // every word of every file counted
    if (me.id() == 0) {
      std::map<std::string, std::uint64_t> sequential;
      std::uint64_t total = 0;
      for (const std::string& file : files) {
        for_each_word(file, [&](const std::string& word) {
          ++sequential[word];
          ++total;
        });
      }
      const auto counted = words.gather();
      matches = counted.size() == sequential.size() &&
                std::all_of(counted.begin(), counted.end(), [&](const auto& entry) {
                  auto at = sequential.find(entry.first);
                  return at != sequential.end() && at->second == entry.second;
                });
      fmt::print("word_count: {} files, {} words, {} distinct, over {} threads\n", files.size(),
                 total, counted.size(), me.thread_count());
      for (const auto& [word, n] : words.top_k(10)) fmt::print("  {:>8}  {}\n", n, word);
      fmt::print("word_count: thread 0 merged {} of its inserts at the sender and sent {} updates\n",
                 words.combined(), words.sent());
      fmt::print("word_count: {} the sequential count\n", matches ? "matches" : "DIFFERS FROM");
    }
    words.barrier();  // thread 0 asked every part: nobody leaves before
  });
  return matches ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "word_count: %s\n", e.what());
  return 1;
}
