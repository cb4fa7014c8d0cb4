// The Hex GTP session against oversized input: a 100 MB line is answered "line too long" in
// bounded memory (this program counts the largest allocation it makes) and the session goes on;
// an error shows a short prefix of what it refuses, never the whole of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <new>
#include <sstream>
#include <streambuf>
#include <string>
#include <string_view>

#include "gtp.hpp"
#include "hex.hpp"

namespace {

// The largest single allocation since the last reset (every operator new of this program).
std::atomic<std::size_t> largest_allocation{0};

void note_allocation(std::size_t size) noexcept {
  std::size_t seen = largest_allocation.load(std::memory_order_relaxed);
  while (size > seen && !largest_allocation.compare_exchange_weak(seen, size)) {
  }
}

void* allocate(std::size_t size) {
  note_allocation(size);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t size) { return allocate(size); }
void* operator new[](std::size_t size) { return allocate(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace {

using seriema::hex::gtp_session;
using seriema::hex::hex;
using result = seriema::mcts::search_result<hex::move>;

constexpr std::size_t limit = gtp_session::max_line_bytes;

// Input made while it is read: `before`, then `filler` bytes of 'x', then `after`. The filler
// is never held whole, so any large allocation is the reader's.
class generated_input : public std::streambuf {
 public:
  generated_input(std::string before, std::size_t filler, std::string after)
      : before_(std::move(before)), filler_(filler), after_(std::move(after)) {}

 protected:
  int_type underflow() override {
    std::size_t n = 0;
    while (n < buffer_.size()) {
      if (at_ < before_.size()) {
        const std::size_t k = std::min(buffer_.size() - n, before_.size() - at_);
        std::copy_n(before_.data() + at_, k, buffer_.data() + n);
        n += k;
        at_ += k;
      } else if (at_ < before_.size() + filler_) {
        const std::size_t k = std::min(buffer_.size() - n, before_.size() + filler_ - at_);
        std::fill_n(buffer_.data() + n, k, 'x');
        n += k;
        at_ += k;
      } else if (at_ < before_.size() + filler_ + after_.size()) {
        const std::size_t from = at_ - before_.size() - filler_;
        const std::size_t k = std::min(buffer_.size() - n, after_.size() - from);
        std::copy_n(after_.data() + from, k, buffer_.data() + n);
        n += k;
        at_ += k;
      } else {
        break;
      }
    }
    if (n == 0) return traits_type::eof();
    setg(buffer_.data(), buffer_.data(), buffer_.data() + n);
    return traits_type::to_int_type(buffer_[0]);
  }

 private:
  std::string before_;
  std::size_t filler_;
  std::string after_;
  std::size_t at_ = 0;
  std::array<char, 65536> buffer_{};
};

result first_cell(const hex& game, const hex::state&, double) {
  result r;
  r.best = game.at(0, 0);
  r.rollouts = 1;
  return r;
}

// The responses of a session to `input`, and the largest allocation made while it ran.
std::pair<std::string, std::size_t> session_over(std::streambuf& input) {
  gtp_session session(first_cell, "test-engine", "1.2.3", 3);
  std::istream in(&input);
  std::ostringstream out;
  largest_allocation = 0;
  session.run(in, out);
  const std::size_t largest = largest_allocation.load();
  return {out.str(), largest};
}

TEST(gtp_limits, a_100_mb_line_is_refused_in_bounded_memory_and_the_session_goes_on) {
  constexpr std::size_t filler = 100'000'000;
  generated_input input("1 name\n2 play b ", filler, "\n3 name\n4 play b a1\n5 quit\n6 name\n");
  const auto [answers, largest] = session_over(input);
  const std::size_t length = std::string_view("2 play b ").size() + filler;
  EXPECT_EQ(answers, "=1 test-engine\n\n?2 line too long (" + std::to_string(length) +
                         " bytes, limit 65536)\n\n=3 test-engine\n\n=4 \n\n=5 \n\n");
  // A line is kept up to the limit, never whole: no allocation near its size.
  EXPECT_LT(largest, std::size_t{1} << 20) << "an allocation of " << largest << " bytes";
}

TEST(gtp_limits, a_line_of_the_limit_is_handled_and_one_byte_more_is_refused) {
  const std::string at_limit = "7 name" + std::string(limit - 6, ' ');
  const std::string beyond = at_limit + " ";
  generated_input input(at_limit + "\n" + beyond + "\n8 name", 0, "");  // no '\n' at the end
  const auto [answers, largest] = session_over(input);
  EXPECT_EQ(answers, "=7 test-engine\n\n?7 line too long (65537 bytes, limit 65536)\n\n"
                     "=8 test-engine\n\n");
  (void)largest;
}

TEST(gtp_limits, handle_refuses_a_line_past_the_limit_without_reading_it_all) {
  gtp_session session(first_cell, "test-engine", "1.2.3", 3);
  const std::string line = "12 play b " + std::string(10 * limit, 'y');
  EXPECT_EQ(session.handle(line), "?12 line too long (655370 bytes, limit 65536)\n\n");
  EXPECT_EQ(session.handle("name"), "= test-engine\n\n");
}

TEST(gtp_limits, errors_show_a_short_prefix_of_what_they_refuse) {
  gtp_session session(first_cell, "test-engine", "1.2.3", 3);
  const std::string move(60'000, 'z');
  const std::string answer = session.handle("play b " + move);
  EXPECT_EQ(answer, "? syntax error: invalid move text '" + std::string(32, 'z') +
                        "... (60000 bytes)'\n\n");
  EXPECT_EQ(session.handle("play " + move + " a1"),
            "? syntax error: invalid color '" + std::string(32, 'z') + "... (60000 bytes)'\n\n");
  EXPECT_EQ(session.handle("param_game " + move + " 1"),
            "? unknown parameter: " + std::string(32, 'z') + "... (60000 bytes)\n\n");
  EXPECT_EQ(session.handle("play b a1"), "= \n\n");  // and the session goes on
}

}  // namespace
