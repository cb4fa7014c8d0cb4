// The group API: options, names of statuses and modes, and the member's operations forwarded to
// its state (src/group/member.cpp, progress.cpp).
#include <seriema/group/group.hpp>

#include <fmt/format.h>

#include <seriema/base/error.hpp>

#include "member.hpp"

namespace seriema::group {

const char* to_string(delivery mode) noexcept {
  return mode == delivery::ordered ? "ordered" : "unordered";
}

const char* to_string(remote_push push) noexcept {
  switch (push) {
    case remote_push::automatic:
      return "automatic";
    case remote_push::put:
      return "put";
    case remote_push::message:
      return "message";
  }
  return "unknown";
}

const char* to_string(group_status status) noexcept {
  switch (status) {
    case group_status::ok:
      return "ok";
    case group_status::too_large:
      return "too large";
    case group_status::full:
      return "window full";
    case group_status::closed:
      return "closed";
    case group_status::deadline_exceeded:
      return "deadline exceeded";
    case group_status::error:
      return "error";
  }
  return "unknown";
}

void group_options::validate() const {
  if (max_message == 0 || max_message > (1u << 20)) {
    throw config_error(
        fmt::format("group_options::max_message {} is outside 1 .. 1048576 bytes", max_message));
  }
  if (window == 0 || window > 4096) {
    throw config_error(fmt::format("group_options::window {} is outside 1 .. 4096", window));
  }
  if (mode != delivery::ordered && mode != delivery::unordered) {
    throw config_error("group_options::mode is neither ordered nor unordered");
  }
  if (static_cast<unsigned>(push) > static_cast<unsigned>(remote_push::message)) {
    throw config_error("group_options::push is not a remote_push");
  }
  if (capacity > detail::max_members) {
    throw config_error(fmt::format("group_options::capacity {} is more than {} seats", capacity,
                                   detail::max_members));
  }
  if (max_large_message != 0 &&
      (max_large_message <= max_message || max_large_message > (1u << 30))) {
    throw config_error(fmt::format(
        "group_options::max_large_message {} is outside max_message + 1 ({}) .. 1073741824 bytes "
        "(0: no large messages)",
        max_large_message, max_message + 1));
  }
  if (large_window == 0 || large_window > 16) {
    throw config_error(
        fmt::format("group_options::large_window {} is outside 1 .. 16", large_window));
  }
  if (suspect_after_ms < 10 || suspect_after_ms > 3'600'000) {
    throw config_error(fmt::format("group_options::suspect_after_ms {} is outside 10 .. 3600000",
                                   suspect_after_ms));
  }
}

group::group(std::unique_ptr<detail::member_state> state) noexcept : state_(std::move(state)) {}
group::group(group&&) noexcept = default;
group& group::operator=(group&&) noexcept = default;
group::~group() = default;

group group::create(fabric::thread_context& ctx, std::span<const fabric::thread_id> members,
                    const group_options& options, deadline_clock::time_point deadline,
                    std::function<void(const message&)> on_deliver) {
  options.validate();
  return group(std::make_unique<detail::member_state>(ctx, members, options, deadline,
                                                      std::move(on_deliver)));
}

group group::join(fabric::thread_context& ctx, std::span<const fabric::thread_id> founders,
                  const group_options& options, deadline_clock::time_point deadline,
                  std::function<void(const message&)> on_deliver,
                  std::function<void(std::span<const std::byte>)> load_state) {
  options.validate();
  return group(detail::member_state::join(ctx, founders, options, deadline,
                                          std::move(on_deliver), std::move(load_state)));
}

group_status group::begin_send(std::size_t n, std::span<std::byte>& room) {
  return state_->begin_send(n, room);
}
group_status group::end_send(std::size_t n) { return state_->end_send(n); }
group_status group::wait_for_room(std::size_t n, deadline_clock::time_point deadline) {
  return state_->wait_for_room(n, deadline);
}
invoke::future<void> group::send_call(fabric::function_id id,
                                      std::span<const std::byte> closure,
                                      std::span<const std::byte> arguments,
                                      deadline_clock::time_point deadline) {
  return state_->send_call(id, closure, arguments, deadline);
}
void group::on_deliver(std::function<void(const message&)> handler) {
  state_->handler_ = std::move(handler);
}
void group::on_view_change(std::function<void(const view&)> handler) {
  state_->view_handler_ = std::move(handler);
}
void group::on_state_transfer(std::function<std::vector<std::byte>()> save) {
  state_->state_saver_ = std::move(save);
}
view group::current_view() const { return state_->current_view(); }
group_status group::wait_delivered(std::uint64_t count, deadline_clock::time_point deadline) {
  return state_->wait_delivered(count, deadline);
}
group_status group::flush(deadline_clock::time_point deadline) { return state_->flush(deadline); }
std::uint64_t group::delivered() const noexcept { return state_->delivered_; }
std::uint32_t group::rank() const noexcept { return state_->me_; }
const std::vector<fabric::thread_id>& group::members() const noexcept { return state_->members_; }
const group_options& group::options() const noexcept { return state_->options_; }
const group_counters& group::counters() const noexcept { return state_->counters_; }
std::string group::path_to(std::uint32_t m) const { return state_->path_to(m); }
void group::close() noexcept {
  if (state_) state_->close();
}

}  // namespace seriema::group
