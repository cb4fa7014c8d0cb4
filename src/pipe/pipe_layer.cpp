// The pipe layer of each worker: rendezvous hellos, close notices, and the regions of closed ends
// kept until the peer has closed too or died (so that nothing writes into freed memory).
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/fabric/runtime.hpp>

#include "ends.hpp"

namespace seriema::pipe::detail {

namespace {

std::unique_ptr<fabric::thread_extension> make_layer(fabric::thread_context&) {
  return std::make_unique<pipe_layer>();
}

// Registered before main: every worker's context gets one (attached threads open no pipes).
const std::size_t registered = fabric::register_thread_layer(
    {"pipe", fabric::layer_slot::pipe, fabric::layer_scope::workers, &make_layer});

nlohmann::json to_json(const pipe_counters& c) {
  return {{"buffers", c.buffers},
          {"bytes", c.bytes},
          {"releases", c.releases},
          {"hand_backs", c.hand_backs},
          {"exhausted", c.exhausted},
          {"rejected_slots", c.rejected_slots},
          {"rejected_releases", c.rejected_releases},
          {"peak_heap_bytes", c.peak_heap_bytes},
          {"peak_live_bytes", c.peak_live_bytes},
          {"forwarded", c.forwarded},
          {"redirected", c.redirected}};
}

void add_to(pipe_counters& total, const pipe_counters& c) {
  total.buffers += c.buffers;
  total.bytes += c.bytes;
  total.releases += c.releases;
  total.hand_backs += c.hand_backs;
  total.exhausted += c.exhausted;
  total.rejected_slots += c.rejected_slots;
  total.rejected_releases += c.rejected_releases;
  total.peak_heap_bytes = std::max(total.peak_heap_bytes, c.peak_heap_bytes);
  total.peak_live_bytes = std::max(total.peak_live_bytes, c.peak_live_bytes);
  total.forwarded += c.forwarded;
  total.redirected += c.redirected;
}

}  // namespace

pipe_layer& pipe_layer::of(fabric::thread_context& ctx) {
  auto* layer = static_cast<pipe_layer*>(ctx.extension(fabric::layer_slot::pipe));
  if (layer == nullptr) {
    throw error(fmt::format("pipe: thread {} is not a worker of runtime::run (pipes join two "
                            "workers)",
                            ctx.id()));
  }
  return *layer;
}

pipe_layer::~pipe_layer() {
  // Regions whose peer never closed stay with the allocation service until the runtime ends: a
  // peer that is alive and still holds its end could write into them.
  if (!kept_.empty()) {
    try {
      log::info("pipe: {} region(s) of closed pipe ends kept until the runtime ends (their peer "
                "ends were never closed)",
                kept_.size());
    } catch (...) {  // the log is best effort
    }
  }
}

pipe_key pipe_layer::next_key(fabric::thread_id self, fabric::thread_id peer, role as) {
  const fabric::thread_id writer = as == role::writer ? self : peer;
  const fabric::thread_id reader = as == role::writer ? peer : self;
  return {writer, reader, ordinals_[{writer, reader}]++};
}

void pipe_layer::on_hello(const pipe_key& key, role from, const hello& h) {
  hellos_[{key, from}] = h;
}

std::unique_ptr<hello> pipe_layer::take_hello(const pipe_key& key, role from) {
  auto it = hellos_.find({key, from});
  if (it == hellos_.end()) return nullptr;
  auto h = std::make_unique<hello>(it->second);
  hellos_.erase(it);
  return h;
}

void pipe_layer::on_closed(fabric::thread_context& self, const pipe_key& key, role from,
                           stream_totals totals) {
  const role ours = from == role::writer ? role::reader : role::writer;
  if (from == role::reader) settle_orphans(self, key);
  if (auto kept = kept_.find({key, ours}); kept != kept_.end()) {
    kept->second.peer_done = true;
    (void)free_if_unused(self, kept);
    return;
  }
  closed_peers_[{key, from}] = totals;
  if (from == role::writer) {
    for (reader_state* r : readers_) {
      if (r->key() == key) r->writer_closed(totals);
    }
  } else {
    for (writer_state* w : writers_) {
      if (w->key() == key) w->peer_closed();
    }
  }
}

bool pipe_layer::peer_closed(const pipe_key& key, role from, stream_totals* totals) const {
  auto it = closed_peers_.find({key, from});
  if (it == closed_peers_.end()) return false;
  *totals = it->second;
  return true;
}

void pipe_layer::retire(fabric::thread_context& self, const pipe_key& key, role as,
                        const transfer::registered_buffer& region, int peer_process) {
  const role peer = as == role::writer ? role::reader : role::writer;
  const bool peer_done =
      closed_peers_.erase({key, peer}) != 0 || self.rt().peer_failed(peer_process);
  const auto [it, added] = kept_.insert_or_assign({key, as}, kept_region{region, peer_process,
                                                                         peer_done});
  (void)added;
  (void)free_if_unused(self, it);
}

pipe_layer::kept_map::iterator pipe_layer::free_if_unused(fabric::thread_context& self,
                                                          kept_map::iterator it) {
  const bool held = it->first.second == role::reader && holds_.contains(it->first.first);
  if (!it->second.peer_done || held) return std::next(it);
  // A closed writer's forwards are read from this region: they come back before it goes.
  if (it->first.second == role::writer) settle_orphans(self, it->first.first);
  free_region(self, it->second.region);
  return kept_.erase(it);
}

void pipe_layer::release_hold(fabric::thread_context& self, const pipe_key& reader_key) {
  auto hold = holds_.find(reader_key);
  if (hold == holds_.end() || --hold->second != 0) return;
  holds_.erase(hold);
  if (auto kept = kept_.find({reader_key, role::reader}); kept != kept_.end()) {
    (void)free_if_unused(self, kept);
  }
}

void pipe_layer::settle(fabric::thread_context& self, const forward_note& note) {
  for (reader_state* r : readers_) {
    if (r->id() == note.from_end) r->return_lent(note.from_entry);
  }
  release_hold(self, note.from_key);
}

void pipe_layer::adopt(const pipe_key& key, orphans o) { orphans_[key] = std::move(o); }

std::size_t pipe_layer::collect_orphans(fabric::thread_context& self) {
  std::size_t settled = 0;
  for (auto it = orphans_.begin(); it != orphans_.end();) {
    orphans& o = it->second;
    read_releases(o.area, o.slots, o.seen, [&](bool decoded, std::uint32_t entry) {
      forward_note& note = o.notes[heap_book::index_of(entry) % o.notes.size()];
      if (!decoded || note.from_end == 0 || note.record != entry) return;
      settle(self, note);
      note = {};
      --o.out;
      ++settled;
    });
    it = o.out == 0 ? orphans_.erase(it) : std::next(it);
  }
  return settled;
}

void pipe_layer::settle_orphans(fabric::thread_context& self, const pipe_key& key) {
  auto it = orphans_.find(key);
  if (it == orphans_.end()) return;
  const std::vector<forward_note> notes = std::move(it->second.notes);
  orphans_.erase(it);
  for (const forward_note& note : notes) {
    if (note.from_end != 0) settle(self, note);
  }
}

std::size_t pipe_layer::poll(fabric::thread_context& self) {
  // Work done when forwards came back: their releases then wait for the idle flush.
  std::size_t settled = 0;
  for (writer_state* w : writers_) settled += w->poll_forwards();
  if (!orphans_.empty()) settled += collect_orphans(self);
  return settled;
}

void pipe_layer::free_region(fabric::thread_context& self,
                             const transfer::registered_buffer& region) {
  if (!self.rt().service_free(reinterpret_cast<std::uint64_t>(region.data), region.size)) {
    log::warning("pipe: the region at {} ({} bytes) was not the allocation service's to free",
                 static_cast<const void*>(region.data), region.size);
  }
}

void pipe_layer::remove(writer_state* w) { std::erase(writers_, w); }
void pipe_layer::remove(reader_state* r) { std::erase(readers_, r); }

void pipe_layer::account(role as, const pipe_counters& c) {
  add_to(as == role::writer ? written_ : read_, c);
  ++opened_;
}

void pipe_layer::flush(fabric::thread_context&) {
  for (reader_state* r : readers_) (void)r->flush_releases();
  for (writer_state* w : writers_) w->publish_backlog();
}

void pipe_layer::peers_failed(fabric::thread_context& self) {
  fabric::runtime& rt = self.rt();
  for (writer_state* w : writers_) {
    if (rt.peer_failed(w->peer_process())) w->settle_forwards();  // they come back
  }
  std::vector<pipe_key> dead_orphans;
  for (const auto& [key, o] : orphans_) {
    if (rt.peer_failed(o.peer_process)) dead_orphans.push_back(key);
  }
  for (const pipe_key& key : dead_orphans) settle_orphans(self, key);
  for (auto it = kept_.begin(); it != kept_.end();) {
    if (rt.peer_failed(it->second.peer_process)) it->second.peer_done = true;
    it = free_if_unused(self, it);
  }
}

std::string pipe_layer::counters_json() const {
  pipe_counters written = written_;
  pipe_counters read = read_;
  for (const writer_state* w : writers_) add_to(written, w->counters_);
  for (const reader_state* r : readers_) add_to(read, r->counters_);
  return nlohmann::json{{"ends_closed", opened_},
                        {"regions_awaiting_peers", kept_.size()},
                        {"open_writers", writers_.size()},
                        {"open_readers", readers_.size()},
                        {"written", to_json(written)},
                        {"read", to_json(read)}}
      .dump();
}

}  // namespace seriema::pipe::detail
