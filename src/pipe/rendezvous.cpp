// Opening and closing a pipe end: the hello each end sends the other (its region and options),
// the wait for the peer's, and the close notice that lets the peer free what we wrote into.
#include "rendezvous.hpp"

#include <fmt/format.h>

#include <cstring>
#include <seriema/base/error.hpp>
#include <seriema/fabric/runtime.hpp>

namespace seriema::pipe::detail {

namespace {

role other(role as) noexcept { return as == role::writer ? role::reader : role::writer; }

const char* name(role as) noexcept { return as == role::writer ? "writer" : "reader"; }

void check_peer(fabric::thread_context& ctx, fabric::thread_id peer) {
  fabric::runtime& rt = ctx.rt();
  if (peer == ctx.id()) {
    throw error(fmt::format("pipe: thread {} cannot open a pipe to itself", peer));
  }
  if (peer >= rt.placement().thread_count()) {
    throw error(fmt::format("pipe: thread {} is not a worker (the job has {} workers)", peer,
                            rt.placement().thread_count()));
  }
  const int process = rt.process_of_thread(peer);
  if (rt.peer_failed(process)) {
    throw error(fmt::format("pipe: thread {} is on rank {}, which is dead", peer, process));
  }
}

}  // namespace

opening begin_open(fabric::thread_context& ctx, fabric::thread_id peer,
                   const pipe_options& options, role as, std::uint64_t region_bytes) {
  options.validate();
  check_peer(ctx, peer);
  fabric::runtime& rt = ctx.rt();
  pipe_layer& layer = pipe_layer::of(ctx);
  opening o{&ctx, &layer, layer.next_key(ctx.id(), peer, as), options, peer,
            rt.process_of_thread(peer), {}};
  const int zone = rt.placement().locate(ctx.id()).zone;
  o.region = rt.service_allocate(zone, static_cast<std::size_t>(region_bytes));
  if (!o.region) {
    throw error(fmt::format("pipe {}: rank {} could not allocate the {}'s {} bytes in zone {}",
                            ctx.id(), rt.rank(), name(as), region_bytes, zone));
  }
  // Slot words and the release count start at 0: "never written".
  std::memset(o.region.data, 0, o.region.size);
  const hello h{transfer::remote_memory_locator::make(rt.rank(), o.region), options};
  const pipe_key key = o.key;
  const fabric::call_status sent = ctx.call(peer, [key, as, h](fabric::thread_context& self) {
    pipe_layer::of(self).on_hello(key, as, h);
  });
  if (sent != fabric::call_status::ok) {
    (void)rt.service_free(reinterpret_cast<std::uint64_t>(o.region.data), o.region.size);
    throw error(fmt::format("pipe: the {}'s hello to thread {} was not sent: {}", name(as), peer,
                            fabric::to_string(sent)));
  }
  return o;
}

hello end_open(opening& o, role as, fabric::deadline_clock::time_point deadline) {
  fabric::thread_context& ctx = *o.ctx;
  deadline = ctx.deadline_in_force(deadline);
  std::unique_ptr<hello> got;
  const auto peer_dead = [&] { return ctx.rt().peer_failed(o.peer_process); };
  {
    fabric::thread_context::deferring_scope keep_exceptions(ctx);
    ctx.wait_until([&] { return (got = o.layer->take_hello(o.key, other(as))) || peer_dead(); },
                   deadline);
  }
  std::string problem;
  if (!got) {
    problem = peer_dead() ? fmt::format("rank {} died", o.peer_process)
                          : std::string("the deadline passed");
  } else if (!(got->options == o.options)) {
    problem = "it was opened with other pipe_options";
  } else if (got->region.process != o.peer_process) {
    problem = fmt::format("its region is on rank {}, not {}", got->region.process,
                          o.peer_process);
  }
  if (problem.empty()) return *got;
  close_end(o, as, {});
  const std::string message =
      fmt::format("pipe {} -> {} (#{}): the {} on thread {} did not open its end: {}",
                  o.key.writer, o.key.reader, o.key.ordinal, name(other(as)), o.peer, problem);
  if (!got && !peer_dead()) throw deadline_error(message);
  throw error(message);
}

void close_end(opening& o, role as, stream_totals totals) noexcept {
  fabric::thread_context& ctx = *o.ctx;
  const pipe_key key = o.key;
  try {
    // Lost when the peer is dead, which frees our region in the layer as well.
    (void)ctx.call(o.peer, [key, as, totals](fabric::thread_context& self) {
      pipe_layer::of(self).on_closed(self, key, as, totals);
    });
    o.layer->retire(ctx, key, as, o.region, o.peer_process);
  } catch (...) {  // a full map or log: the region then stays with the allocation service
  }
  o.region = {};
}

}  // namespace seriema::pipe::detail
