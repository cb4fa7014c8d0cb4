// Transmitter: unsignaled posts, flush tickets, the poster/callback hand-off in the request's
// reserved bytes, and completion-tag bookkeeping. See the header for the invariants.
#include <bit>
#include <chrono>
#include <cstring>
#include <limits>
#include <mutex>
#include <seriema/base/enum_names.hpp>
#include <seriema/base/error.hpp>
#include <seriema/base/settings.hpp>
#include <seriema/transfer/detail/settings.hpp>
#include <seriema/transfer/transmitter.hpp>
#include <seriema/transfer/ucx.hpp>
#include <thread>
#include <vector>

namespace seriema::transfer {

namespace {

// Layout of our reserved bytes inside a UCX request (ucx_context::request_reserve). Zeroed by
// request_init when UCX creates the request; reset to zero by us before every free, so the
// next use starts clean.
struct flush_slot {
  std::atomic<std::uint32_t> state;  // 0: nobody yet; 1: poster stored ticket; 2: callback ran
  ucs_status_t status;               // written by the callback before its exchange
  std::uint64_t ticket;              // written by the poster before its exchange
};
static_assert(sizeof(flush_slot) <= ucx_context::request_reserve);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

// The handle UCX returns is the start of the reserved bytes (request_init gets the same pointer).
flush_slot* slot_of(void* request) noexcept { return static_cast<flush_slot*>(request); }

constexpr int spins_before_yield = 256;

// Atomics work on one naturally aligned 64-bit word inside the locator.
bool is_atomic_word(const remote_memory& dst, std::uint64_t offset) noexcept {
  return dst.contains(offset, sizeof(std::uint64_t)) && (dst.address() + offset) % 8 == 0;
}

}  // namespace

const char* to_string(op_status status) noexcept {
  static constexpr enum_name_entry<op_status> names[] = {
      {op_status::ok, "ok"},
      {op_status::peer_failed, "peer failed"},
      {op_status::out_of_range, "remote range out of bounds"},
      {op_status::error, "UCX error"},
      {op_status::tags_full, "the buffer already carries tags of too many transmitters"},
  };
  return name_in(names, status);
}

transmitter_options transmitter_options::from_environment() {
  transmitter_options options;
  options.completion_interval =
      static_cast<std::uint32_t>(config::get_unsigned("SERIEMA_COMPLETION_INTERVAL", 1, 1u << 20));
  return options;
}

namespace {

// Completion states of destroyed transmitters: kept (reachable, so not a leak) because late
// UCX callbacks and unit tags may still read them. About 200 bytes per transmitter ever made.
// The list itself is never destroyed either: a static vector would be freed at exit, before
// LeakSanitizer looks, and the states would then look leaked.
std::mutex retired_mutex;
std::vector<void*>& retired_states() {
  static auto* states = new std::vector<void*>;
  return *states;
}

}  // namespace

transmitter::transmitter(ucx_endpoint& endpoint, const transmitter_options& options)
    : endpoint_(endpoint),
      options_(options),
      interval_mask_(std::has_single_bit(options.completion_interval)
                         ? options.completion_interval - 1
                         : 0),
      state_(new completion_state) {
  if (options.completion_interval == 0) {
    delete state_;
    throw config_error("transmitter: completion_interval must be at least 1");
  }
}

transmitter::~transmitter() {
  if (!failed() && !endpoint_.failed()) {
    // Bounded: a peer that hangs without an error must not hang our destructor.
    completion_tag everything = current_tag();
    request_completion();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    unsigned idle = 0;
    while (!everything.is_complete() && !failed() && !endpoint_.failed() &&
           std::chrono::steady_clock::now() < deadline) {
      if (!progress() && ++idle > 256) {
        std::this_thread::yield();
        idle = 0;
      }
    }
  }
  std::lock_guard lock(retired_mutex);
  retired_states().push_back(state_);
}

void transmitter::completion_state::complete_ticket(std::uint64_t ticket) noexcept {
  // fetch-max: completed_tickets only grows.
  std::uint64_t want = ticket + 1;
  std::uint64_t seen = counter.completed_tickets.load(std::memory_order_relaxed);
  while (seen < want && !counter.completed_tickets.compare_exchange_weak(
                            seen, want, std::memory_order_release, std::memory_order_relaxed)) {
  }
}

void transmitter::completion_state::fail(ucx_status_code status) noexcept {
  last_error.store(status, std::memory_order_relaxed);
  failed.store(true, std::memory_order_release);
  // UCX has purged the endpoint's operations: every tagged buffer is free again.
  counter.completed_tickets.store(std::numeric_limits<std::uint64_t>::max(),
                                  std::memory_order_release);
}

// UCX's completion callback of a flush, and the finishing step both it and the poster may take.
struct transmitter::flush_completion {
  static void on_done(void* request, ucs_status_t status, void* user_data) {
    // user_data is the completion state, which outlives the transmitter.
    flush_slot* slot = slot_of(request);
    slot->status = status;
    if (slot->state.exchange(2, std::memory_order_acq_rel) == 1) {
      // The poster already stored the ticket and left: we finish.
      std::uint64_t ticket = slot->ticket;
      slot->state.store(0, std::memory_order_relaxed);
      finish(static_cast<completion_state*>(user_data), ticket, status);
      ucp_request_free(request);
    }
  }
  static void finish(completion_state* state, std::uint64_t ticket, ucs_status_t status) noexcept {
    if (status == UCS_OK) {
      state->complete_ticket(ticket);
    } else {
      state->fail(status);  // a flush that fails means the endpoint is dead
    }
  }
};

bool transmitter::progress() noexcept { return endpoint_.worker().progress(); }

void transmitter::request_completion() noexcept {
  std::uint64_t ticket = tickets_claimed_.fetch_add(1, std::memory_order_acq_rel);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &flush_completion::on_done;
  param.user_data = state_;
  void* request = ucp_ep_flush_nbx(endpoint_.handle(), &param);
  if (request == nullptr) {
    state_->complete_ticket(ticket);  // completed in place; UCX will not call back
    return;
  }
  if (UCS_PTR_IS_ERR(request)) {
    ucs_status_t status = UCS_PTR_STATUS(request);
    if (endpoint_.failed()) {
      state_->fail(endpoint_.failure());
    } else {
      // Not posted (e.g. no memory): this ticket stays open; the next one claimed covers it.
      state_->last_error.store(status, std::memory_order_relaxed);
    }
    return;
  }
  flush_slot* slot = slot_of(request);
  slot->ticket = ticket;
  if (slot->state.exchange(1, std::memory_order_acq_rel) == 2) {
    // The callback ran before we stored the ticket: we finish.
    ucs_status_t status = slot->status;
    slot->state.store(0, std::memory_order_relaxed);
    flush_completion::finish(state_, ticket, status);
    ucp_request_free(request);
  }
}

op_status transmitter::finish_post(void* request, unit_tags* tags) noexcept {
  if (UCS_PTR_IS_ERR(request)) {
    ucs_status_t status = UCS_PTR_STATUS(request);
    if (endpoint_.failed() || status == UCS_ERR_CONNECTION_RESET ||
        status == UCS_ERR_ENDPOINT_TIMEOUT || status == UCS_ERR_UNREACHABLE) {
      state_->fail(status);
      return op_status::peer_failed;
    }
    state_->last_error.store(status, std::memory_order_relaxed);
    return op_status::error;
  }
  if (request != nullptr) ucp_request_free(request);  // unsignaled: completion comes by ticket
  if (tags != nullptr) {
    // Cannot fail: tags_accept() was checked before posting, by the owner of the unit.
    (void)tags->add({&state_->counter, tickets_claimed_.load(std::memory_order_acquire)});
  }
  std::uint64_t posted = ops_posted_.fetch_add(1, std::memory_order_relaxed) + 1;
  // Every S-th operation asks for completion. S is usually a power of two: a mask instead of
  // a 64-bit division on every post.
  if (options_.automatic &&
      (interval_mask_ != 0 ? (posted & interval_mask_) == 0
                           : posted % options_.completion_interval == 0)) {
    request_completion();
  }
  return op_status::ok;
}

op_status transmitter::put(std::span<const std::byte> local, const remote_memory& dst,
                           std::uint64_t offset, unit_tags* tags) noexcept {
  if (!dst.contains(offset, local.size())) return op_status::out_of_range;
  if (endpoint_.failed()) return op_status::peer_failed;
  if (!tags_accept(tags)) return op_status::tags_full;
  ucp_request_param_t param{};
  return finish_post(ucp_put_nbx(endpoint_.handle(), local.data(), local.size(),
                                 dst.address() + offset, dst.rkey(), &param),
                     tags);
}

op_status transmitter::get(std::span<std::byte> local, const remote_memory& src,
                           std::uint64_t offset, unit_tags* tags) noexcept {
  if (!src.contains(offset, local.size())) return op_status::out_of_range;
  if (endpoint_.failed()) return op_status::peer_failed;
  if (!tags_accept(tags)) return op_status::tags_full;
  ucp_request_param_t param{};
  return finish_post(ucp_get_nbx(endpoint_.handle(), local.data(), local.size(),
                                 src.address() + offset, src.rkey(), &param),
                     tags);
}

op_status transmitter::check_atomic_target(const remote_memory& dst,
                                           std::uint64_t offset) const noexcept {
  if (!is_atomic_word(dst, offset)) return op_status::out_of_range;
  if (endpoint_.failed()) return op_status::peer_failed;
  return op_status::ok;
}

op_status transmitter::atomic_add(const remote_memory& dst, std::uint64_t offset,
                                  std::uint64_t value) noexcept {
  if (op_status status = check_atomic_target(dst, offset); status != op_status::ok) return status;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  param.datatype = ucp_dt_make_contig(sizeof(std::uint64_t));
  // The operand is copied by UCX before the call returns for non-fetching atomics.
  return finish_post(ucp_atomic_op_nbx(endpoint_.handle(), UCP_ATOMIC_OP_ADD, &value, 1,
                                       dst.address() + offset, dst.rkey(), &param),
                     nullptr);
}

op_status transmitter::fetching_atomic(unsigned op, const remote_memory& dst,
                                       std::uint64_t offset, const std::uint64_t& operand,
                                       std::uint64_t* result, unit_tags* tags) noexcept {
  if (op_status status = check_atomic_target(dst, offset); status != op_status::ok) return status;
  if (!tags_accept(tags)) return op_status::tags_full;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
  param.datatype = ucp_dt_make_contig(sizeof(std::uint64_t));
  param.reply_buffer = result;
  return finish_post(ucp_atomic_op_nbx(endpoint_.handle(), static_cast<ucp_atomic_op_t>(op),
                                       &operand, 1, dst.address() + offset, dst.rkey(), &param),
                     tags);
}

op_status transmitter::fetch_add(const remote_memory& dst, std::uint64_t offset,
                                 std::uint64_t value, std::uint64_t* result,
                                 unit_tags* tags) noexcept {
  return fetching_atomic(UCP_ATOMIC_OP_ADD, dst, offset, value, result, tags);
}

op_status transmitter::compare_swap(const remote_memory& dst, std::uint64_t offset,
                                    std::uint64_t expected, std::uint64_t desired,
                                    std::uint64_t* result, unit_tags* tags) noexcept {
  // UCX CSWAP (ucp.h atomic table): `buffer` holds the value to compare with; the reply buffer
  // holds the value to store on entry and receives the old remote value.
  *result = desired;
  return fetching_atomic(UCP_ATOMIC_OP_CSWAP, dst, offset, expected, result, tags);
}

op_status transmitter::swap(const remote_memory& dst, std::uint64_t offset, std::uint64_t value,
                            std::uint64_t* result, unit_tags* tags) noexcept {
  return fetching_atomic(UCP_ATOMIC_OP_SWAP, dst, offset, value, result, tags);
}

op_status transmitter::send(unsigned am_id, std::span<const std::byte> header,
                            std::span<const std::byte> payload, unit_tags* tags) noexcept {
  if (endpoint_.failed()) return op_status::peer_failed;
  if (!tags_accept(tags)) return op_status::tags_full;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_AM_SEND_FLAG_EAGER;
  return finish_post(ucp_am_send_nbx(endpoint_.handle(), am_id, header.data(), header.size(),
                                     payload.data(), payload.size(), &param),
                     tags);
}

op_status transmitter::wait(completion_tag tag) noexcept {
  // No ticket covering `tag` claimed yet (automatic mode claims one only every S posts): claim
  // one, or this would wait for posts that may never come.
  if (tag.counter == &state_->counter &&
      tickets_claimed_.load(std::memory_order_acquire) <= tag.ticket) {
    request_completion();
  }
  int idle = 0;
  while (!tag.is_complete()) {
    if (endpoint_.failed()) {
      state_->fail(endpoint_.failure());
      return op_status::peer_failed;
    }
    if (!progress() && ++idle >= spins_before_yield) {
      std::this_thread::yield();
      idle = 0;
    }
  }
  return failed() ? op_status::peer_failed : op_status::ok;
}

op_status transmitter::flush() noexcept {
  return wait(current_tag());  // the next ticket covers everything posted so far
}

}  // namespace seriema::transfer
