// The group layer of each worker: it polls the thread's members, meets members at creation
// (hellos), and keeps the regions of closed members until no other member can write into them.
#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <nlohmann/json.hpp>
#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/fabric/runtime.hpp>

#include "member.hpp"

namespace seriema::group::detail {

namespace {

std::unique_ptr<fabric::thread_extension> make_layer(fabric::thread_context&) {
  return std::make_unique<group_layer>();
}

// Registered before main: every worker's context gets one (attached threads join no group).
const std::size_t registered = fabric::register_thread_layer(
    {"group", fabric::layer_slot::group, fabric::layer_scope::workers, &make_layer});

void add_to(group_counters& total, const group_counters& c) {
  total.sent += c.sent;
  total.nulls += c.nulls;
  total.delivered += c.delivered;
  total.delivered_bytes += c.delivered_bytes;
  total.calls_run += c.calls_run;
  total.calls_threw += c.calls_threw;
  total.window_full += c.window_full;
  total.pushes += c.pushes;
  total.message_pushes += c.message_pushes;
  total.pushes_held += c.pushes_held;
  total.rejected_slots += c.rejected_slots;
  total.rejected_rows += c.rejected_rows;
  total.large_sent += c.large_sent;
  total.large_pushed_bytes += c.large_pushed_bytes;
}

}  // namespace

void hold_until_exit(std::unique_ptr<large_region> region) {
  if (!region) return;
  static std::mutex mutex;
  static auto* held = new std::vector<large_region*>();  // never destroyed: outlives the runtime
  std::lock_guard lock(mutex);
  held->push_back(region.release());
}

group_layer& group_layer::of(fabric::thread_context& ctx) {
  auto* layer = static_cast<group_layer*>(ctx.extension(fabric::layer_slot::group));
  if (layer == nullptr) {
    throw error(fmt::format("group: thread {} is not a worker of runtime::run (groups are made "
                            "of workers)",
                            ctx.id()));
  }
  return *layer;
}

group_layer::~group_layer() {
  // A member that never closed may still push into these regions: the table regions stay with
  // the allocation service, and the large regions stay mapped, until the process ends (held
  // where a leak checker sees them reachable).
  for (kept_region& k : kept_) hold_until_exit(std::move(k.large));
  if (!kept_.empty()) {
    try {
      log::info("group: {} region(s) of closed members kept until the runtime ends (other "
                "members never closed)",
                kept_.size());
    } catch (...) {  // the log is best effort
    }
  }
}

std::size_t group_layer::poll(fabric::thread_context&) {
  std::size_t work = 0;
  // By index: a handler may create or close a group of this thread meanwhile.
  for (std::size_t i = 0; i < members_.size(); ++i) {
    if (members_[i] != nullptr) work += members_[i]->progress();
  }
  return work;
}

bool group_layer::take_hello(const group_key& key, std::uint32_t from, hello& out) {
  auto it = hellos_.find({key, from});
  if (it == hellos_.end()) return false;
  out = it->second;
  hellos_.erase(it);
  return true;
}

void group_layer::on_join_request(const group_key& key, const join_request& r) {
  std::vector<join_request>& queue = join_requests_[key];
  const bool known = std::any_of(queue.begin(), queue.end(),
                                 [&](const join_request& q) { return q.thread == r.thread; });
  if (!known) queue.push_back(r);
}

std::optional<join_request> group_layer::pending_join(
    fabric::thread_context& self, const group_key& key,
    const std::vector<fabric::thread_id>& seats) {
  auto it = join_requests_.find(key);
  if (it == join_requests_.end()) return std::nullopt;
  const fabric::runtime& rt = self.rt();
  std::erase_if(it->second, [&](const join_request& r) {
    return std::find(seats.begin(), seats.end(), r.thread) != seats.end() ||
           rt.peer_failed(rt.process_of_thread(r.thread));
  });
  if (it->second.empty()) return std::nullopt;
  return it->second.front();
}

std::optional<join_request> group_layer::join_request_of(const group_key& key,
                                                          fabric::thread_id thread) {
  auto it = join_requests_.find(key);
  if (it == join_requests_.end()) return std::nullopt;
  for (const join_request& r : it->second) {
    if (r.thread == thread) return r;
  }
  return std::nullopt;
}

void group_layer::drop_join_request(const group_key& key, fabric::thread_id thread) {
  auto it = join_requests_.find(key);
  if (it == join_requests_.end()) return;
  std::erase_if(it->second, [&](const join_request& r) { return r.thread == thread; });
  if (it->second.empty()) join_requests_.erase(it);
}

bool group_layer::take_admission(const group_key& key, admission& out) {
  auto it = admissions_.find(key);
  if (it == admissions_.end()) return false;
  out = std::move(it->second);
  admissions_.erase(it);
  return true;
}

void group_layer::keep_state(const group_key& key, std::uint32_t seat, int process,
                             std::vector<std::uint8_t> bytes) {
  states_[{key, seat}] = kept_state{process, std::move(bytes)};
}

std::optional<std::vector<std::uint8_t>> group_layer::take_state(const group_key& key,
                                                                 std::uint32_t seat) {
  auto it = states_.find({key, seat});
  if (it == states_.end()) return std::nullopt;
  std::vector<std::uint8_t> bytes = std::move(it->second.bytes);
  states_.erase(it);
  return bytes;
}

void group_layer::add(member_state* m) {
  std::erase(members_, nullptr);
  members_.push_back(m);
}

void group_layer::remove(member_state* m) {
  std::replace(members_.begin(), members_.end(), m, static_cast<member_state*>(nullptr));
}

void group_layer::account(const group_counters& c) { add_to(closed_totals_, c); }

void group_layer::keep(std::unique_ptr<fabric::detail::region_publisher> to_removed) {
  if (to_removed) removed_publishers_.push_back(std::move(to_removed));
}

void group_layer::on_closed(fabric::thread_context& self, const group_key& key,
                            std::uint32_t from) {
  for (kept_region& k : kept_) {
    if (k.key == key) k.waiting.erase(from);
  }
  if (std::none_of(kept_.begin(), kept_.end(), [&](const kept_region& k) { return k.key == key; })) {
    closed_early_[key].push_back(from);
  }
  free_settled(self);
}

void group_layer::retire(fabric::thread_context& self, const group_key& key,
                         const transfer::registered_buffer& region,
                         std::unique_ptr<large_region> large,
                         std::map<std::uint32_t, int> peers) {
  if (auto early = closed_early_.find(key); early != closed_early_.end()) {
    for (std::uint32_t m : early->second) peers.erase(m);
    closed_early_.erase(early);
  }
  kept_.push_back({key, region, std::move(large), std::move(peers)});
  peers_failed(self);  // members dead already write nothing more
}

void group_layer::peers_failed(fabric::thread_context& self) {
  for (member_state* m : members_) {
    if (m != nullptr) m->peers_failed();
  }
  std::erase_if(removed_publishers_, [](const auto& p) { return p->peer_dead(); });
  std::erase_if(states_, [&](const auto& s) { return self.rt().peer_failed(s.second.process); });
  for (kept_region& k : kept_) {
    std::erase_if(k.waiting, [&](const auto& m) { return self.rt().peer_failed(m.second); });
  }
  free_settled(self);
}

void group_layer::free_settled(fabric::thread_context& self) {
  std::erase_if(kept_, [&](const kept_region& k) {
    if (!k.waiting.empty()) return false;
    if (!self.rt().service_free(reinterpret_cast<std::uint64_t>(k.region.data), k.region.size)) {
      log::warning("group: the region at {} ({} bytes) was not the allocation service's to free",
                   static_cast<const void*>(k.region.data), k.region.size);
    }
    return true;
  });
}

std::string group_layer::counters_json() const {
  group_counters total = closed_totals_;
  for (const member_state* m : members_) {
    if (m != nullptr) add_to(total, m->counters_);
  }
  if (total.sent + total.delivered + total.nulls == 0) return "{}";
  return nlohmann::json{{"sent", total.sent},
                        {"nulls", total.nulls},
                        {"delivered", total.delivered},
                        {"delivered_bytes", total.delivered_bytes},
                        {"calls_run", total.calls_run},
                        {"calls_threw", total.calls_threw},
                        {"window_full", total.window_full},
                        {"pushes", total.pushes},
                        {"message_pushes", total.message_pushes},
                        {"pushes_held", total.pushes_held},
                        {"rejected_slots", total.rejected_slots},
                        {"rejected_rows", total.rejected_rows},
                        {"large_sent", total.large_sent},
                        {"large_pushed_bytes", total.large_pushed_bytes}}
      .dump();
}

}  // namespace seriema::group::detail
