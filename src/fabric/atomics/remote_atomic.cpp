// Blocking remote atomics on the thread's cached transmitters: post, ask for completion, wait
// serving calls (protocol and outcomes at the top of include/seriema/fabric/remote_atomic.hpp).
#include <fmt/format.h>

#include <seriema/base/error.hpp>
#include <seriema/fabric/detail/thread_state.hpp>
#include <seriema/fabric/remote_atomic.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/transfer/transmitter.hpp>
#include <seriema/transfer/ucx.hpp>

namespace seriema::fabric {

namespace detail {

namespace {

// The thread's transmitter to `process`, made on first use: manual completion, since every
// blocking operation asks for its own flush ticket.
transfer::transmitter& transmitter_to(thread_context& ctx, int process) {
  auto& transmitters = ctx.state().remote_ops.transmitters;
  if (transmitters.size() <= static_cast<std::size_t>(process)) {
    transmitters.resize(static_cast<std::size_t>(ctx.rt().size()));
  }
  auto& slot = transmitters[static_cast<std::size_t>(process)];
  if (!slot) {
    transfer::transmitter_options options;
    options.completion_interval = 1;
    options.automatic = false;
    slot = std::make_unique<transfer::transmitter>(ctx.endpoint_to(process), options);
  }
  return *slot;
}

transfer::remote_memory resolve(thread_context& ctx,
                                const transfer::remote_memory_locator& memory) {
  if (!memory.valid()) throw error("remote atomic: the locator is invalid (default-constructed?)");
  if (memory.process >= ctx.rt().size()) {
    throw error(fmt::format("remote atomic: the locator names rank {}, the job has {}",
                            memory.process, ctx.rt().size()));
  }
  if (ctx.rt().peer_failed(memory.process)) {
    throw error(
        fmt::format("remote atomic: rank {}, which owns the word, is dead", memory.process));
  }
  // No direct pointer: every access is a UCX atomic (see the header).
  return transfer::remote_memory(ctx.endpoint_to(memory.process), memory, /*allow_direct=*/false);
}

// thread_context::wait_until's loop without its deadline_in_force (the caller chose the
// deadline): polls (running calls, progressing the workers) until pred() or the deadline. A call
// that throws meanwhile does not end the wait: its exception leaves the next outer poll.
template <class Pred>
void wait_serving_calls(thread_context& ctx, Pred pred, deadline_clock::time_point deadline) {
  thread_context::deferring_scope keep_exceptions(ctx);
  unsigned idle = 0;
  while (!pred()) {
    if (ctx.poll() != 0) {
      idle = 0;
      continue;
    }
    if (idle == 0) ctx.flush_layers();
    if (deadline != no_deadline && deadline_clock::now() >= deadline) return;
    thread_context::back_off(idle);
  }
}

transfer::op_status post(transfer::transmitter& tx, const transfer::remote_memory& memory,
                         atomic_op op, std::uint64_t offset, std::uint64_t operand,
                         std::uint64_t compare, std::uint64_t* reply) noexcept {
  switch (op) {
    case atomic_op::add:
      return tx.atomic_add(memory, offset, operand);
    case atomic_op::fetch_add:
      return tx.fetch_add(memory, offset, operand, reply);
    case atomic_op::compare_swap:
      return tx.compare_swap(memory, offset, compare, operand, reply);
    case atomic_op::swap:
      return tx.swap(memory, offset, operand, reply);
  }
  return transfer::op_status::error;
}

}  // namespace

remote_words::remote_words(thread_context& ctx, const transfer::remote_memory_locator& memory)
    : ctx_(&ctx),
      transmitter_(nullptr),
      memory_(resolve(ctx, memory)) {
  transmitter_ = &transmitter_to(ctx, memory.process);
}

bool remote_words::holds_word(std::uint64_t offset) const noexcept {
  return memory_.contains(offset, sizeof(std::uint64_t)) && (memory_.address() + offset) % 8 == 0;
}

atomic_result remote_words::execute(atomic_op op, std::uint64_t offset, std::uint64_t operand,
                                    std::uint64_t compare, deadline_clock::time_point deadline,
                                    bool in_force) {
  const int process = memory_.locator().process;
  transfer::transmitter& tx = *transmitter_;
  if (ctx_->rt().peer_failed(process) || tx.failed()) return {outcome::not_executed, 0};
  remote_op_state::reply_word* reply = ctx_->state().remote_ops.claim_reply();
  if (reply == nullptr) return {outcome::not_executed, 0};
  if (post(tx, memory_, op, offset, operand, compare, &reply->value) != transfer::op_status::ok) {
    return {outcome::not_executed, 0};
  }
  // The ticket claimed next covers the operation just posted (transmitter.hpp's invariants).
  const transfer::completion_tag done = tx.current_tag();
  reply->in_flight = done;
  tx.request_completion();
  transfer::ucx_endpoint& endpoint = tx.endpoint();
  if (in_force) deadline = ctx_->deadline_in_force(deadline);
  wait_serving_calls(*ctx_, [&] {
    return done.is_complete() || endpoint.failed() || ctx_->rt().peer_failed(process);
  }, deadline);
  // A failing transmitter marks itself failed before it completes every ticket (release, then
  // release): a complete tag read first, then failed() still false, is a real completion.
  const bool complete = done.is_complete();
  if (complete && !tx.failed()) return {outcome::done, reply->value};
  if (tx.failed() || endpoint.failed() || ctx_->rt().peer_failed(process)) {
    return {outcome::may_have_executed, 0};
  }
  return {outcome::deadline_exceeded, 0};
}

}  // namespace detail

remote_atomic::remote_atomic(thread_context& ctx, const transfer::remote_memory_locator& memory,
                             std::uint64_t offset)
    : words_(ctx, memory), offset_(offset) {
  if (!words_.holds_word(offset)) {
    throw error(fmt::format("remote_atomic: offset {} of {} is not an 8-byte aligned word inside "
                            "it",
                            offset, memory.to_string()));
  }
}

atomic_result remote_atomic::fetch_add(std::uint64_t value,
                                       deadline_clock::time_point deadline) {
  return words_.execute(detail::atomic_op::fetch_add, offset_, value, 0, deadline);
}

outcome remote_atomic::add(std::uint64_t value, deadline_clock::time_point deadline) {
  return words_.execute(detail::atomic_op::add, offset_, value, 0, deadline).how;
}

atomic_result remote_atomic::compare_exchange(std::uint64_t expected, std::uint64_t desired,
                                              deadline_clock::time_point deadline) {
  return words_.execute(detail::atomic_op::compare_swap, offset_, desired, expected, deadline);
}

atomic_result remote_atomic::exchange(std::uint64_t value,
                                      deadline_clock::time_point deadline) {
  return words_.execute(detail::atomic_op::swap, offset_, value, 0, deadline);
}

atomic_result remote_atomic::load(deadline_clock::time_point deadline) {
  return words_.execute(detail::atomic_op::fetch_add, offset_, 0, 0, deadline);
}

outcome remote_atomic::store(std::uint64_t value, deadline_clock::time_point deadline) {
  return words_.execute(detail::atomic_op::swap, offset_, value, 0, deadline).how;
}

}  // namespace seriema::fabric
