// What a thread keeps for its blocking remote atomics (fabric::remote_atomic, distributed_lock):
// one transmitter per destination process and the words fetching atomics reply into. Kept in
// the thread's local_thread_state, so it lives as long as the thread's UCX worker.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <seriema/transfer/completion.hpp>
#include <seriema/transfer/transmitter.hpp>
#include <vector>

namespace seriema::fabric::detail {

// Owner thread only (the thread whose worker the transmitters post on).
//
// Reply words: UCX writes a fetching atomic's old value into its reply word when the operation
// completes, which may be after the wait for it gave up (deadline). So a reply word is not on
// the caller's stack but here, and stays claimed (`in_flight`, the operation's completion tag)
// until that tag completes: a word is reused only when UCX will not write it again. The words
// live until the worker goes (release_transport drops the transmitters first; the worker's
// destruction ends every operation), so a late reply never lands in freed memory.
struct remote_op_state {
  struct reply_word {
    std::uint64_t value = 0;            // written by UCX when the operation completes
    transfer::completion_tag in_flight;  // empty or complete: free
  };
  static constexpr std::size_t reply_word_count = 32;

  // By process; created on first use, manual completion (each blocking operation asks for it).
  std::vector<std::unique_ptr<transfer::transmitter>> transmitters;
  std::array<reply_word, reply_word_count> replies{};
  std::size_t next_reply = 0;  // where the search for a free word starts (round robin)

  // A free reply word, or null when all are held by operations abandoned at their deadline
  // whose completion has not come yet.
  reply_word* claim_reply() noexcept {
    for (std::size_t i = 0; i < reply_word_count; ++i) {
      reply_word& word = replies[(next_reply + i) % reply_word_count];
      if (word.in_flight.is_complete()) {
        next_reply = (next_reply + i + 1) % reply_word_count;
        word.in_flight = {};
        return &word;
      }
    }
    return nullptr;
  }
};

}  // namespace seriema::fabric::detail
