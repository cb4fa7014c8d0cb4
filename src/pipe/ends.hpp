// The pipe ends' state (writer_state, reader_state) and the per-thread pipe layer that meets them
// (rendezvous messages, close notices, the regions of closed ends kept until the peer is done).
#pragma once

#include <atomic>
#include <compare>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <seriema/fabric/detail/thread_extension.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/pipe/detail/heap_book.hpp>
#include <seriema/pipe/detail/slot.hpp>
#include <seriema/pipe/pipe.hpp>
#include <seriema/transfer/completion.hpp>
#include <seriema/transfer/memory.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <string>
#include <vector>

#include "publisher.hpp"

namespace seriema::pipe::detail {

/// Names one pipe job-wide: the n-th pipe opened from `writer` to `reader`.
struct pipe_key {
  std::uint32_t writer = 0;
  std::uint32_t reader = 0;
  std::uint32_t ordinal = 0;
  auto operator<=>(const pipe_key&) const = default;
};

enum class role : std::uint8_t { writer, reader };

/// What a writer's close notice tells its reader: its writes and its posts (pull direction).
struct stream_totals {
  std::uint64_t writes = 0;
  std::uint64_t posts = 0;
};

/// What each end sends the other when it opens: the region the other writes into, and its
/// options (the ends compare them).
struct hello {
  transfer::remote_memory_locator region;
  pipe_options options;
};

class writer_state;
class reader_state;

/// A buffer a writer forwarded in place (rforward): the redirect record's allocation entry, whose
/// reader end lent the buffer, and the entry that end hands back to its own writer once the next
/// hop freed the record.
struct forward_note {
  std::uint32_t record = 0;
  std::uint32_t from_end = 0;  ///< 0: no forward
  pipe_key from_key;
  std::uint32_t from_entry = 0;
};

/// What a reader end says of a live buffer another pipe of its thread would forward: where its
/// payload lies (`offset`: in the end's region), the entry to hand back for it, and whether it
/// lies in a region another pipe forwarded (redirected: copy it on).
struct lendable_buffer {
  pipe_status status = pipe_status::ok;  ///< ok, not_owner, stale, closed
  std::span<const std::byte> payload;
  bool redirected = false;
  std::uint64_t offset = 0;
  std::uint32_t entry = 0;
};

/// One rget_async's pull in flight: which post (the reader's count of pulls when it began), its
/// slot, the get's completion tag.
struct pull_ticket {
  bool active = false;
  std::uint64_t post = 0;
  slot_view view;
  transfer::completion_tag tag;
};

/// Reads the release entries a reader handed back into a writer's release area (`area`, with
/// `slots` entries) since `seen`, advancing it: on_entry(decoded, entry) for each, in order. The
/// count word is loaded with acquire: the entries it counts were stored before it.
template <class OnEntry>
void read_releases(const std::byte* area, std::uint64_t slots, std::uint64_t& seen,
                   OnEntry on_entry) {
  const std::uint64_t handed_back =
      std::atomic_ref<const std::uint64_t>(*reinterpret_cast<const std::uint64_t*>(area))
          .load(std::memory_order_acquire);
  for (; seen < handed_back; ++seen) {
    std::uint64_t word;
    std::memcpy(&word, area + release_entries_offset + (seen % slots) * 8, sizeof word);
    std::uint32_t entry;
    const bool decoded = decode_release(word, entry);
    on_entry(decoded, entry);
  }
}

/// A worker's pipes (layer_slot::pipe). Owner thread only.
class pipe_layer final : public fabric::thread_extension {
 public:
  /// The calling worker's layer; throws seriema::error on a thread that is not a worker.
  static pipe_layer& of(fabric::thread_context& ctx);
  ~pipe_layer() override;

  std::size_t poll(fabric::thread_context&) override;  ///< takes back forwards freed downstream
  void flush(fabric::thread_context& self) override;  ///< readers hand back deferred releases
  void peers_failed(fabric::thread_context& self) override;  ///< frees regions of dead peers
  [[nodiscard]] std::string counters_json() const override;

  /// The key of the next pipe this thread opens as `as` with `peer`.
  pipe_key next_key(fabric::thread_id self, fabric::thread_id peer, role as);
  std::uint32_t next_end_id() noexcept { return ++end_ids_; }

  // Messages from the peer (run as calls on this thread).
  void on_hello(const pipe_key& key, role from, const hello& h);
  void on_closed(fabric::thread_context& self, const pipe_key& key, role from,
                 stream_totals totals);
  /// Whether the peer in role `from` closed its end of `key` already (a writer's totals in
  /// *totals); an end that opens after that learns it here.
  bool peer_closed(const pipe_key& key, role from, stream_totals* totals) const;
  /// The hello the peer in role `from` sent for `key`, taken out; null when none arrived yet.
  std::unique_ptr<hello> take_hello(const pipe_key& key, role from);

  void add(writer_state* w) { writers_.push_back(w); }
  void add(reader_state* r) { readers_.push_back(r); }
  void remove(writer_state* w);
  void remove(reader_state* r);
  /// Keeps `region` (of this thread's end in role `as`) until the peer closed or died; frees it
  /// at once when the peer already did.
  void retire(fabric::thread_context& self, const pipe_key& key, role as,
              const transfer::registered_buffer& region, int peer_process);
  [[nodiscard]] std::size_t kept_regions() const noexcept { return kept_.size(); }

  // Forwards in place: the reader end that lent a buffer keeps its region (held) until the
  // buffer comes back; a writer closed while its next hop still reads forwarded buffers leaves
  // their notes here (adopt) until that reader closes or dies.
  void hold(const pipe_key& reader_key) { ++holds_[reader_key]; }
  void release_hold(fabric::thread_context& self, const pipe_key& reader_key);
  /// The lent buffer comes back: to its reader end if that is still open, and the hold ends.
  void settle(fabric::thread_context& self, const forward_note& note);
  /// A writer closed with forwards out: its notes (by record index), its release area (kept
  /// with its region until the reader is done) and how far it had read it.
  struct orphans {
    int peer_process = -1;
    std::vector<forward_note> notes;
    const std::byte* area = nullptr;
    std::uint64_t slots = 0;  ///< release entries in the area
    std::uint64_t seen = 0;
    std::uint32_t out = 0;  ///< notes not settled yet
  };
  void adopt(const pipe_key& key, orphans o);
  /// Adds a closed end's counters to the thread's totals.
  void account(role as, const pipe_counters& c);

 private:
  struct kept_region {
    transfer::registered_buffer region;
    int peer_process = -1;
    bool peer_done = false;  ///< the peer closed or died: only holds keep the region now
  };
  using kept_map = std::map<std::pair<pipe_key, role>, kept_region>;  ///< (key, role of our end)
  static void free_region(fabric::thread_context& self, const transfer::registered_buffer& region);
  /// Frees a kept region once its peer is done and no forward holds it; the next entry.
  kept_map::iterator free_if_unused(fabric::thread_context& self, kept_map::iterator it);
  void settle_orphans(fabric::thread_context& self, const pipe_key& key);
  /// Settles the orphaned forwards whose records the reader freed since; how many.
  std::size_t collect_orphans(fabric::thread_context& self);

  std::map<std::pair<fabric::thread_id, fabric::thread_id>, std::uint32_t> ordinals_;  ///< (w, r)
  std::map<std::pair<pipe_key, role>, hello> hellos_;
  /// (key, role of the end that closed) -> a writer's totals (zeros from a reader).
  std::map<std::pair<pipe_key, role>, stream_totals> closed_peers_;
  kept_map kept_;
  std::map<pipe_key, std::uint32_t> holds_;  ///< reader key -> buffers lent and not back
  std::map<pipe_key, orphans> orphans_;      ///< closed writer's key -> its forwards
  std::vector<writer_state*> writers_;
  std::vector<reader_state*> readers_;
  std::uint32_t end_ids_ = 0;
  pipe_counters written_{};
  pipe_counters read_{};
  std::uint64_t opened_ = 0;
};

/// Everything an open needs before the peer answers.
struct opening {
  fabric::thread_context* ctx;
  pipe_layer* layer;
  pipe_key key;
  pipe_options options;
  fabric::thread_id peer;
  int peer_process;
  transfer::registered_buffer region;  ///< this end's region (written by the peer)
};

class writer_state {
 public:
  /// Allocates the release area and sends the hello (the first half of the rendezvous).
  writer_state(fabric::thread_context& ctx, fabric::thread_id reader, const pipe_options& options);
  ~writer_state();
  /// Waits for the reader's hello and makes the heap's view (the second half).
  void finish(fabric::deadline_clock::time_point deadline);

  reservation rmalloc(std::size_t n);
  reservation rmalloc(std::size_t n, fabric::deadline_clock::time_point deadline);
  reservation rstage(std::size_t n);
  pipe_status rpost(const rbuffer& b);
  reservation try_allocate(std::size_t n);  ///< rmalloc without counting or polling
  std::span<std::byte> rmem(const rbuffer& b) noexcept;
  pipe_status rwrite(const rbuffer& b, std::size_t used);
  /// `in_poll`: a future's attempt (neither polls nor waits for a cell: exhausted instead).
  pipe_status rforward(reader_state& from, const rbuffer& b, bool in_poll);
  pipe_status rforward(reader_state& from, const rbuffer& b,
                       fabric::deadline_clock::time_point deadline);
  void close() noexcept;
  /// Publishes records left queued by a forward inside a poll that found a cell busy, or by a
  /// publication that failed.
  void publish_backlog();
  /// The reader closed: forwards it still held come back.
  void peer_closed() noexcept;
  void settle_forwards() noexcept;  ///< every forward still out comes back (the reader is gone)
  /// Takes back the forwards the reader freed (from the thread's polls); how many.
  std::size_t poll_forwards() { return lent_out_ != 0 && !closed_ ? collect_releases() : 0; }
  [[nodiscard]] int peer_process() const noexcept { return open_.peer_process; }
  [[nodiscard]] const pipe_key& key() const noexcept { return open_.key; }
  [[nodiscard]] std::size_t live_buffers() const noexcept { return book_ ? book_->live() : 0; }
  [[nodiscard]] fabric::thread_context& context() const noexcept { return *open_.ctx; }

  pipe_options options_;
  pipe_counters counters_{};
  std::unique_ptr<publisher> publisher_;
  /// False once the end closed: futures of its waits still pending end with closed.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

 private:
  pipe_status refusal() const noexcept;
  pipe_status publish_in_ring(heap_book::record& r);
  /// The queued buffers, in allocation order (next fit) or rwrite order (the others); a record
  /// whose publication fails stays queued, first in line.
  pipe_status publish_queued();
  pipe_status publish_in_order();  ///< publish_queued's loop (not re-entered)
  pipe_status publish_in_place();         ///< next fit
  pipe_status publish_in_rwrite_order();  ///< the others, through the notification ring
  void written(heap_book::record& r) noexcept;
  std::size_t collect_releases();  ///< takes back what the reader freed; forwards settled
  /// The number the reader knows `region` by, sending a source record first when it is new: ok,
  /// or the record's refusal (exhausted, ...); source 0 (with ok) when no number is left.
  struct announced {
    pipe_status status = pipe_status::ok;
    std::uint32_t source = 0;
  };
  announced announce(const transfer::remote_memory_locator& region);
  bool poll_for_room();  ///< counts an exhausted heap and polls now and then; whether it did work
  reservation allocate_for_forward(std::size_t n);  ///< try_allocate, poll_for_room if exhausted
  pipe_status forward_copy(reader_state& from, const rbuffer& b, std::span<const std::byte> data);
  pipe_status forward_in_place(reader_state& from, const rbuffer& b,
                               const lendable_buffer& lent, std::uint32_t source);

  heap_book::record* live_record(const rbuffer& b) noexcept;
  [[nodiscard]] std::byte* exposed() const noexcept;  ///< the exposed heap in our region

  opening open_;
  region_layout layout_;
  std::uint32_t id_;
  std::uint32_t pull_id_;               ///< the end id of staged buffers (pull direction)
  std::uint64_t heap_offset_ = 0;  ///< of the heap in the reader's region
  std::unique_ptr<heap_book> pull_book_;         ///< the exposed heap (pull direction)
  std::vector<std::uint64_t> pull_descriptors_;  ///< publication source of each pull slot
  std::uint64_t posts_ = 0;
  transfer::registered_buffer shadow_;  ///< local copy of the heap (not direct)
  std::byte* view_ = nullptr;            ///< the heap as rmem sees it
  std::unique_ptr<heap_book> book_;
  std::uint64_t writes_ = 0;
  std::uint64_t releases_seen_ = 0;
  std::uint32_t idle_allocations_ = 0;  ///< rmalloc calls that found no room (polling rhythm)
  std::vector<forward_note> forwards_;  ///< by allocation entry index: forwards in place
  std::uint32_t lent_out_ = 0;          ///< of those, not freed by the reader yet
  std::vector<transfer::remote_memory_locator> sources_;  ///< announced: source i + 1
  bool by_reference_ = false;  ///< the heap is mapped (direct): forwards go in place
  bool in_poll_ = false;       ///< inside rforward(..., in_poll = true)
  bool publishing_ = false;    ///< inside publish_queued
  std::vector<std::uint32_t> ring_order_;  ///< best/worst/first fit: queued entries, rwrite order
  std::uint64_t ring_queued_ = 0;          ///< entries ever queued there
  std::uint64_t ring_published_ = 0;       ///< of those, published
  bool finished_ = false;
  bool closed_ = false;
  bool peer_closed_ = false;
};

class reader_state {
 public:
  /// Allocates the ring and the heap and sends the hello.
  reader_state(fabric::thread_context& ctx, fabric::thread_id writer, const pipe_options& options);
  ~reader_state();
  /// Waits for the writer's hello.
  void finish(fabric::deadline_clock::time_point deadline);

  /// `may_poll` false: neither polls nor hands releases back (a future's attempt runs inside a
  /// poll of the thread, which must not nest another).
  read_result rread(bool may_poll = true);
  read_result rread(fabric::deadline_clock::time_point deadline);
  get_result rget(std::span<std::byte> into);
  get_result rget(std::span<std::byte> into, fabric::deadline_clock::time_point deadline);
  /// rget_async's attempt (inside a poll: neither waits nor publishes): starts the pull of the
  /// next post into `into`, or sees whether the one `ticket` started landed; empty until then.
  get_result rget_step(std::span<std::byte> into, pull_ticket& ticket);
  std::span<std::byte> rmem(const rbuffer& b) const noexcept;
  /// `may_wait` false (inside a poll): the hand-back is published only when no cell is busy,
  /// else at the next flush.
  pipe_status rfree(const rbuffer& b, bool may_wait = true);
  pipe_status flush_releases();

  // Forwarding (writer_state::rforward on another pipe of this thread).
  [[nodiscard]] lendable_buffer lend_check(const rbuffer& b) const noexcept;
  void lend(const rbuffer& b) noexcept;    ///< the buffer leaves: neither rmem nor rfree now
  void unlend(const rbuffer& b) noexcept;  ///< the forward failed: the buffer is ours again
  /// A lent buffer came back: its release is queued (published by the next flush; never here,
  /// as this may run inside a poll).
  void return_lent(std::uint32_t entry) noexcept;
  pipe_status flush_if_due();  ///< publishes the queued releases once a batch is full
  /// Inside a poll: publishes the queued hand-backs when a batch is full and that cannot wait.
  void flush_if_free() {
    if (unpublished_ >= batch_ && publisher_->free_cells(2)) (void)flush_releases();
  }
  [[nodiscard]] transfer::remote_memory_locator region_locator() const;
  [[nodiscard]] std::uint32_t id() const noexcept { return id_; }
  void close() noexcept;
  [[nodiscard]] fabric::thread_context& context() const noexcept { return *open_.ctx; }
  void writer_closed(stream_totals totals) noexcept {
    writer_closed_ = true;
    writer_totals_ = totals;
  }
  [[nodiscard]] const pipe_key& key() const noexcept { return open_.key; }

  pipe_options options_;
  pipe_counters counters_{};
  /// False once the end closed: futures of its waits still pending end with closed.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

 private:
  struct held_buffer {
    std::uint64_t offset = 0;  ///< rbuffer::offset (the heap's, or the source region's)
    std::byte* payload = nullptr;
    std::uint64_t size = 0;
    std::uint32_t tag = 0;
    std::uint32_t entry = 0;
    bool live = false;
    bool redirected = false;  ///< the payload lies in a source region (a forward in place)
  };
  /// A source region of redirect records, mapped (a writer names at most max_redirect_sources).
  struct source_region {
    std::unique_ptr<transfer::remote_memory> memory;
    std::byte* base = nullptr;  ///< null: not announced, or not mappable (records naming it
                                ///< are invalid)
  };
  enum class placed : std::uint8_t { buffer, source, invalid };
  /// A ready slot: a buffer in place in the heap, or where its redirect record says (h filled);
  /// a source record (mapped, and its room queued for release); or invalid.
  placed place(const slot_view& view, held_buffer& h);
  void add_source(std::span<const std::byte, source_record_size> record);
  void advance(const slot_view& view) noexcept;  ///< past a ready slot
  const held_buffer* live_buffer(const rbuffer& b) const noexcept;
  [[nodiscard]] std::span<const std::byte> heap() const noexcept;
  /// Nothing found: hands back releases, polls now and then; closed once the writer closed and
  /// every write (or post, when `pulling`) was seen, peer_failed once it died, else empty.
  pipe_status no_buffer(bool pulling, bool may_poll);
  /// Appends a hand-back and publishes the batch when it is full (its status, else ok).
  pipe_status release(std::uint32_t entry);
  void queue_release(std::uint32_t entry) noexcept;  ///< appends a hand-back
  pipe_status hand_back();  ///< flush_releases' publications
  [[nodiscard]] std::uint64_t load_word(std::uint64_t heap_offset) const noexcept;  ///< acquire
  slot_view next_in_place() noexcept;  ///< next fit: the buffer where the previous one ended
  slot_view next_in_ring() noexcept;   ///< the others: the buffer the next ring slot names
  /// Pull direction: the next post's slot, validated (an invalid one is counted, logged once).
  slot_view next_post();
  /// A post pulled: counted, its release published (`may_publish`) or queued.
  get_result pulled(const slot_view& view, bool may_publish);

  opening open_;
  region_layout layout_;
  std::uint32_t id_;
  std::uint64_t heap_offset_ = 0;
  std::unique_ptr<publisher> publisher_;
  std::uint64_t gets_ = 0;  ///< posts pulled so far
  std::vector<held_buffer> held_;
  std::vector<std::uint64_t> releases_;  ///< local copy of the release ring (publication source)
  std::uint64_t read_ = 0;               ///< writes read so far
  std::uint64_t released_ = 0;           ///< releases made
  std::uint64_t unpublished_ = 0;        ///< of those, not handed back yet
  std::uint32_t batch_ = 1;
  bool in_place_ = false;        ///< next fit: buffers are polled where the previous one ended
  std::uint64_t position_ = 0;   ///< in place: where the next buffer's header is expected
  std::uint64_t last_rejected_ = ~std::uint64_t{0};
  stream_totals writer_totals_{};
  bool writer_closed_ = false;
  bool finished_ = false;
  bool closed_ = false;
  bool flushing_ = false;  ///< inside flush_releases (its waits poll, which flush again)
  std::uint32_t idle_reads_ = 0;  ///< rread calls that found nothing (polling rhythm)
  std::vector<source_region> sources_;  ///< source i + 1 of redirect records
  std::uint32_t lent_ = 0;              ///< buffers forwarded in place, not back yet
};

}  // namespace seriema::pipe::detail
