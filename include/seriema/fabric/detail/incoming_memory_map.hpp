// The incoming-memory map of one thread (paper §4.3): registered memory that senders obtained in
// the thread's zone through the allocation service, waiting for the thread to adopt it. Grants
// are wait-free; the owner takes entries out without a lock.
//
// Invariants (a multi-producer, single-consumer linked queue after Vyukov, plus the owner's list):
//  * Producers are the threads serving the allocation service (any number at once). A grant
//    links one node with two steps: `prev = tail_.exchange(node)` (acq_rel), which orders the
//    grants, then `prev->next.store(node)` (release), which makes the node reachable. Both are
//    single atomic instructions: a grant finishes in a bounded number of steps whatever other
//    threads do (wait-free). The node is allocated before the grant, outside the queue.
//  * The consumer is the owner thread (one std::thread at a time: runtime::run hands a thread id
//    from one run's thread to the next with a happens-before). Only it reads `head_` and moves
//    nodes from the queue to `taken_`, its private list, so selecting and erasing entries needs
//    no lock. It frees every node it passes: a node is freed only after its successor is linked.
//  * Between a producer's exchange and its link, the nodes after it are not reachable yet: the
//    consumer then stops early and in_flight() is true. Such an entry is seen at a later take;
//    a caller that acts on "everything granted so far" checks in_flight() and looks again.
//  * A batch (several entries granted in one call) becomes reachable whole: its nodes are
//    chained privately first, and the one exchange-and-link publishes the chain. So a take sees
//    all of a batch or none of it; a messenger's chunks granted together are adopted together
//    (a receiver that took part of a batch would build a shorter ring than its sender's).
#pragma once

#include <atomic>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace seriema::fabric::detail {

template <class Entry>
class incoming_memory_map {
 public:
  incoming_memory_map() : head_(new node{}), tail_(head_) {}
  ~incoming_memory_map() {
    for (node* n = head_; n != nullptr;) delete std::exchange(n, n->next.load());
  }
  incoming_memory_map(const incoming_memory_map&) = delete;
  incoming_memory_map& operator=(const incoming_memory_map&) = delete;

  // Any thread: adds `entries`, in order, after every entry granted before them; a take sees
  // all of them or none. Allocates the nodes first (outside the wait-free part); throws
  // std::bad_alloc like any allocation, with nothing granted.
  void grant(std::span<const Entry> entries) {
    if (entries.empty()) return;
    node* first = nullptr;
    node* last = nullptr;
    try {
      for (const Entry& e : entries) {
        node* fresh = new node{{nullptr}, e};
        // Relaxed: the chain is private until the release store below publishes it.
        if (last != nullptr) last->next.store(fresh, std::memory_order_relaxed);
        else first = fresh;
        last = fresh;
      }
    } catch (...) {
      for (node* n = first; n != nullptr;) delete std::exchange(n, n->next.load());
      throw;
    }
    node* prev = tail_.exchange(last, std::memory_order_acq_rel);
    prev->next.store(first, std::memory_order_release);
  }
  void grant(const Entry& entry) { grant(std::span<const Entry>(&entry, 1)); }

  // Owner: moves out every entry `which` selects, in grant order; the others stay.
  template <class Which>
  std::vector<Entry> take(Which which) {
    collect();
    std::vector<Entry> out;
    std::erase_if(taken_, [&](const Entry& e) {
      if (!which(e)) return false;
      out.push_back(e);
      return true;
    });
    return out;
  }

  // Owner, right after a take(): true when a grant had been ordered but not linked yet (its
  // entry, and those granted after it, were not visible to that take()).
  [[nodiscard]] bool in_flight() const noexcept {
    return head_->next.load(std::memory_order_acquire) == nullptr &&
           tail_.load(std::memory_order_acquire) != head_;
  }

 private:
  struct node {
    std::atomic<node*> next{nullptr};
    Entry entry{};
  };

  // Owner: moves every reachable entry to taken_, freeing the nodes passed. head_ is a node whose
  // entry was already moved (or the initial empty one).
  void collect() {
    for (node* next = head_->next.load(std::memory_order_acquire); next != nullptr;
         next = head_->next.load(std::memory_order_acquire)) {
      taken_.push_back(next->entry);
      delete std::exchange(head_, next);
    }
  }

  node* head_;                      // owner only
  alignas(64) std::atomic<node*> tail_;  // producers (exchange); owner reads in in_flight()
  std::vector<Entry> taken_;        // owner only: entries moved out of the queue, not yet taken
};

}  // namespace seriema::fabric::detail
