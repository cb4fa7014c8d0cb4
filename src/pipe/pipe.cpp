// The public pipe API: option checks, names of the enums, and writer / reader / duplex over the
// ends' state (src/pipe/writer.cpp, reader.cpp).
#include <seriema/pipe/pipe.hpp>

#include <fmt/format.h>

#include <bit>
#include <functional>
#include <memory>
#include <seriema/base/error.hpp>

#include "ends.hpp"

namespace seriema::pipe {

const char* to_string(write_protocol protocol) noexcept {
  switch (protocol) {
    case write_protocol::automatic:
      return "automatic";
    case write_protocol::one_operation:
      return "one_operation";
    case write_protocol::data_then_flag:
      return "data_then_flag";
  }
  return "unknown";
}

const char* to_string(release_mode mode) noexcept {
  switch (mode) {
    case release_mode::automatic:
      return "automatic";
    case release_mode::deferred:
      return "deferred";
    case release_mode::immediate:
      return "immediate";
  }
  return "unknown";
}

const char* to_string(pipe_status status) noexcept {
  switch (status) {
    case pipe_status::ok:
      return "ok";
    case pipe_status::empty:
      return "empty";
    case pipe_status::zero_size:
      return "zero size";
    case pipe_status::too_large:
      return "too large";
    case pipe_status::exhausted:
      return "exhausted";
    case pipe_status::not_owner:
      return "not this pipe's buffer";
    case pipe_status::stale:
      return "stale buffer";
    case pipe_status::closed:
      return "closed";
    case pipe_status::peer_failed:
      return "peer failed";
    case pipe_status::deadline_exceeded:
      return "deadline exceeded";
    case pipe_status::error:
      return "transport error";
    case pipe_status::mismatch:
      return "contributions differ in size";
  }
  return "unknown";
}

void pipe_options::validate() const {
  const detail::region_layout layout{width, heap_bytes, pull_heap_bytes};
  const std::uint64_t region = layout.heap_offset() + heap_bytes;
  if (width == 0 || width > 4096 || !std::has_single_bit(width)) {
    throw config_error(fmt::format("pipe_options::width {} must be a power of two in 1..4096",
                                   width));
  }
  if (heap_bytes < 4096 || heap_bytes % detail::heap_granule != 0 ||
      region > transfer::block_size) {
    throw config_error(fmt::format(
        "pipe_options::heap_bytes {} must be a multiple of {}, at least 4096, and at most {} "
        "with the {}-byte ring of width {}",
        heap_bytes, detail::heap_granule, transfer::block_size - layout.heap_offset(),
        layout.heap_offset(), width));
  }
  const auto f = fit;
  if (f != transfer::fit_policy::next_fit && f != transfer::fit_policy::best_fit &&
      f != transfer::fit_policy::worst_fit && f != transfer::fit_policy::first_fit) {
    throw config_error(fmt::format("pipe_options::fit {} is not a fit policy",
                                   static_cast<unsigned>(f)));
  }
  if (pull_heap_bytes % detail::heap_granule != 0 || layout.writer_bytes() > transfer::block_size ||
      layout.reader_bytes() > transfer::block_size) {
    throw config_error(fmt::format(
        "pipe_options::pull_heap_bytes {} must be a multiple of {}, at most {} (and the heap "
        "with its two rings at most {})",
        pull_heap_bytes, detail::heap_granule, transfer::block_size - layout.exposed_offset(),
        transfer::block_size));
  }
  if (release_batch > width) {
    throw config_error(fmt::format("pipe_options::release_batch {} exceeds the width {}",
                                   release_batch, width));
  }
}

// --- futures of the waits ---

namespace {

// A future's wait on a pipe end: each time the thread's polls drive it, `attempt` tries the
// operation once without polling (it runs inside a poll) and the node ends the future with its
// result unless it says "not yet" (`pending`) before the deadline, when `at_deadline` is
// reported. An end closed first (its `alive` word false) ends it with closed.
pipe_status& status_of(pipe_status& status) noexcept { return status; }
template <class R>
pipe_status& status_of(R& result) noexcept {
  return result.status;
}

template <class R>
struct pipe_wait : invoke::detail::combinator<pipe_wait<R>> {
  std::function<R()> attempt;
  pipe_status pending = pipe_status::empty;
  pipe_status at_deadline = pipe_status::deadline_exceeded;
  deadline_clock::time_point deadline = no_deadline;
  std::shared_ptr<bool> alive;

  bool advance() {
    R result{};
    status_of(result) = pipe_status::closed;
    if (*alive) {
      result = attempt();
      if (status_of(result) == pending) {
        if (deadline_clock::now() < deadline) return false;
        status_of(result) = at_deadline;
      }
    }
    this->table->note_advanced();
    invoke::detail::fulfil<R>(*this->table, *this->out, result);
    return this->done();
  }
};

template <class R>
invoke::future<R> pipe_future(fabric::thread_context& ctx, std::function<R()> attempt,
                              pipe_status pending, pipe_status at_deadline,
                              deadline_clock::time_point deadline, std::shared_ptr<bool> alive) {
  invoke::detail::future_table& table = invoke::detail::futures_of(ctx);
  auto out = invoke::detail::make_local_future<R>(table);
  auto* node = new pipe_wait<R>;
  node->attempt = std::move(attempt);
  node->pending = pending;
  node->at_deadline = at_deadline;
  node->deadline = ctx.deadline_in_force(deadline);
  node->alive = std::move(alive);
  pipe_wait<R>::install(node, *out.record(), table);
  return out;
}

}  // namespace

// --- writer ---

writer::writer(std::unique_ptr<detail::writer_state> state) noexcept : state_(std::move(state)) {}
writer::writer(writer&&) noexcept = default;
writer& writer::operator=(writer&&) noexcept = default;
writer::~writer() = default;

writer writer::open(fabric::thread_context& ctx, fabric::thread_id reader,
                    const pipe_options& options, deadline_clock::time_point deadline) {
  auto state = std::make_unique<detail::writer_state>(ctx, reader, options);
  state->finish(deadline);
  return writer(std::move(state));
}

reservation writer::rmalloc(std::size_t n) { return state_->rmalloc(n); }
reservation writer::rmalloc(std::size_t n, deadline_clock::time_point deadline) {
  return state_->rmalloc(n, deadline);
}
std::span<std::byte> writer::rmem(const rbuffer& buffer) const noexcept {
  return state_->rmem(buffer);
}
pipe_status writer::rwrite(const rbuffer& buffer) { return state_->rwrite(buffer, buffer.size); }
pipe_status writer::rwrite(const rbuffer& buffer, std::size_t used) {
  return state_->rwrite(buffer, used);
}
invoke::future<reservation> writer::rmalloc_async(std::size_t n,
                                                  deadline_clock::time_point deadline) {
  detail::writer_state* state = state_.get();
  return pipe_future<reservation>(
      state->context(), [state, n] { return state->try_allocate(n); }, pipe_status::exhausted,
      pipe_status::exhausted, deadline, state->alive_);
}
reservation writer::rstage(std::size_t n) { return state_->rstage(n); }
pipe_status writer::rpost(const rbuffer& staged) { return state_->rpost(staged); }
pipe_status writer::rforward(reader& from, const rbuffer& buffer) {
  return state_->rforward(*from.state_, buffer, false);
}
invoke::future<pipe_status> writer::rforward_async(reader& from, const rbuffer& buffer,
                                                   deadline_clock::time_point deadline) {
  detail::writer_state* state = state_.get();
  detail::reader_state* source = from.state_.get();
  std::shared_ptr<bool> source_open = source->alive_;
  return pipe_future<pipe_status>(
      state->context(),
      [state, source, source_open, buffer] {
        return *source_open ? state->rforward(*source, buffer, true) : pipe_status::closed;
      },
      pipe_status::exhausted, pipe_status::exhausted, deadline, state->alive_);
}
pipe_status writer::rforward(reader& from, const rbuffer& buffer,
                             deadline_clock::time_point deadline) {
  return state_->rforward(*from.state_, buffer, deadline);
}
void writer::close() noexcept { state_->close(); }
const pipe_options& writer::options() const noexcept { return state_->options_; }
const pipe_counters& writer::counters() const noexcept { return state_->counters_; }
std::size_t writer::live_buffers() const noexcept { return state_->live_buffers(); }
bool writer::direct() const noexcept {
  return state_->publisher_ && state_->publisher_->path() == detail::publish_path::direct;
}
write_protocol writer::protocol() const noexcept {
  if (!state_->publisher_) return state_->options_.protocol;
  return state_->publisher_->path() == detail::publish_path::put ? write_protocol::data_then_flag
                                                                 : write_protocol::one_operation;
}

// --- reader ---

reader::reader(std::unique_ptr<detail::reader_state> state) noexcept : state_(std::move(state)) {}
reader::reader(reader&&) noexcept = default;
reader& reader::operator=(reader&&) noexcept = default;
reader::~reader() = default;

reader reader::open(fabric::thread_context& ctx, fabric::thread_id writer,
                    const pipe_options& options, deadline_clock::time_point deadline) {
  auto state = std::make_unique<detail::reader_state>(ctx, writer, options);
  state->finish(deadline);
  return reader(std::move(state));
}

read_result reader::rread() { return state_->rread(); }
invoke::future<read_result> reader::rread_async(deadline_clock::time_point deadline) {
  detail::reader_state* state = state_.get();
  return pipe_future<read_result>(
      state->context(), [state] { return state->rread(false); }, pipe_status::empty,
      pipe_status::deadline_exceeded, deadline, state->alive_);
}
read_result reader::rread(deadline_clock::time_point deadline) { return state_->rread(deadline); }
std::span<std::byte> reader::rmem(const rbuffer& buffer) const noexcept {
  return state_->rmem(buffer);
}
pipe_status reader::rfree(const rbuffer& buffer) { return state_->rfree(buffer); }
get_result reader::rget(std::span<std::byte> into) { return state_->rget(into); }
get_result reader::rget(std::span<std::byte> into, deadline_clock::time_point deadline) {
  return state_->rget(into, deadline);
}
invoke::future<get_result> reader::rget_async(std::span<std::byte> into,
                                              deadline_clock::time_point deadline) {
  detail::reader_state* state = state_.get();
  auto ticket = std::make_shared<detail::pull_ticket>();
  return pipe_future<get_result>(
      state->context(), [state, into, ticket] { return state->rget_step(into, *ticket); },
      pipe_status::empty, pipe_status::deadline_exceeded, deadline, state->alive_);
}
void reader::flush_releases() { (void)state_->flush_releases(); }
void reader::close() noexcept { state_->close(); }
const pipe_options& reader::options() const noexcept { return state_->options_; }
const pipe_counters& reader::counters() const noexcept { return state_->counters_; }

// --- duplex ---

duplex duplex::open(fabric::thread_context& ctx, fabric::thread_id write_to,
                    fabric::thread_id read_from, const pipe_options& options,
                    deadline_clock::time_point deadline) {
  // Both hellos go out before either end waits: one rendezvous for the two pipes.
  auto out = std::make_unique<detail::writer_state>(ctx, write_to, options);
  auto in = std::make_unique<detail::reader_state>(ctx, read_from, options);
  out->finish(deadline);
  in->finish(deadline);
  return duplex{writer(std::move(out)), reader(std::move(in))};
}

// --- reduction_reader ---

reduction_reader::reduction_reader(std::vector<reader> ends)
    : rounds_(std::make_shared<rounds>()) {
  rounds_->held.assign(ends.size(), read_result{{}, pipe_status::empty});
  rounds_->ends = std::move(ends);
}

reduction_reader& reduction_reader::operator=(reduction_reader&& other) noexcept {
  close();
  rounds_ = std::move(other.rounds_);
  return *this;
}

reduction_reader::~reduction_reader() { close(); }

reduction_reader reduction_reader::open(fabric::thread_context& ctx,
                                        std::span<const fabric::thread_id> writers,
                                        const pipe_options& options,
                                        deadline_clock::time_point deadline) {
  if (writers.empty()) throw config_error("pipe::reduction_reader::open: no writers");
  // Every hello goes out before any end waits: one rendezvous for the k pipes.
  std::vector<std::unique_ptr<detail::reader_state>> states;
  states.reserve(writers.size());
  for (const fabric::thread_id w : writers) {
    states.push_back(std::make_unique<detail::reader_state>(ctx, w, options));
  }
  std::vector<reader> ends;
  ends.reserve(states.size());
  for (auto& state : states) {
    state->finish(deadline);
    ends.push_back(reader(std::move(state)));
  }
  return reduction_reader(std::move(ends));
}

pipe_status reduction_reader::gather(rounds& r, std::size_t element, bool in_poll) {
  pipe_status outcome = pipe_status::ok;
  for (std::size_t w = 0; w < r.ends.size(); ++w) {
    if (r.held[w].status != pipe_status::ok) r.held[w] = r.ends[w].state_->rread(!in_poll);
    // A writer closed or dead ends the reduction; one not written yet only delays the round.
    const pipe_status status = r.held[w].status;
    if (status != pipe_status::ok && (outcome == pipe_status::ok || outcome == pipe_status::empty)) {
      outcome = status;
    }
  }
  if (outcome != pipe_status::ok) return outcome;
  const std::uint64_t size = r.held[0].buffer.size;
  for (const read_result& held : r.held) {
    if (held.buffer.size == size && size % element == 0) continue;
    for (std::size_t w = 0; w < r.ends.size(); ++w) {
      (void)r.ends[w].state_->rfree(r.held[w].buffer, !in_poll);
    }
    std::fill(r.held.begin(), r.held.end(), read_result{{}, pipe_status::empty});
    return pipe_status::mismatch;
  }
  return pipe_status::ok;
}

pipe_status reduction_reader::gather(rounds& r, std::size_t element,
                                     deadline_clock::time_point deadline) {
  pipe_status status = gather(r, element, false);
  if (status != pipe_status::empty) return status;
  fabric::thread_context& ctx = r.ends[0].state_->context();
  const bool came = ctx.wait_until(
      [&] { return (status = gather(r, element, false)) != pipe_status::empty; },
      ctx.deadline_in_force(deadline));
  return came ? status : pipe_status::deadline_exceeded;
}

read_result reduction_reader::finish_round(rounds& r, bool in_poll) {
  for (std::size_t w = 1; w < r.ends.size(); ++w) {
    (void)r.ends[w].state_->rfree(r.held[w].buffer, !in_poll);
  }
  const read_result first = r.held[0];
  std::fill(r.held.begin(), r.held.end(), read_result{{}, pipe_status::empty});
  return first;
}

invoke::future<read_result> reduction_reader::reduce_future(std::function<read_result()> attempt,
                                                            deadline_clock::time_point deadline) {
  if (!rounds_ || rounds_->ends.empty()) {
    throw error("pipe::reduction_reader::rreduce_async: the reader was moved from");
  }
  detail::reader_state& first = *rounds_->ends[0].state_;
  return pipe_future<read_result>(first.context(), std::move(attempt), pipe_status::empty,
                                  pipe_status::deadline_exceeded, deadline, first.alive_);
}

const reader& reduction_reader::end(std::size_t i) const {
  if (i >= writers()) {
    throw error(fmt::format("pipe::reduction_reader::end({}): {} writers", i, writers()));
  }
  return rounds_->ends[i];
}

std::span<std::byte> reduction_reader::rmem(const rbuffer& buffer) const noexcept {
  return writers() == 0 ? std::span<std::byte>{} : rounds_->ends[0].rmem(buffer);
}

pipe_status reduction_reader::rfree(const rbuffer& buffer) {
  return writers() == 0 ? pipe_status::closed : rounds_->ends[0].rfree(buffer);
}

void reduction_reader::close() noexcept {
  if (!rounds_) return;
  for (reader& end : rounds_->ends) end.close();
}

std::size_t regions_awaiting_peers(fabric::thread_context& ctx) {
  return detail::pipe_layer::of(ctx).kept_regions();
}

}  // namespace seriema::pipe
