// Send-based messages kept in memory their thread owns while UCX sends them (see the header).
#include <seriema/fabric/detail/staged_sends.hpp>

#include <ucp/api/ucp.h>

#include <cstring>
#include <utility>

namespace seriema::fabric::detail {

namespace {
// A block larger than this is freed once its send completed (a rare large call must not pin
// its size per peer for the rest of the job).
constexpr std::size_t kept_capacity = 64 * 1024;
}  // namespace

staged_sends::result staged_sends::send_waiting(ucp_ep* endpoint, int process, unsigned am_id,
                                                std::span<const std::byte> header,
                                                std::span<const std::byte> closure,
                                                std::span<const std::byte> buffer, waiter wait) {
  staged& entry = of(process);
  if (entry.request != nullptr) {
    const wait_end end = wait.call(wait.caller_wait, entry.request);
    if (end != wait_end::completed) {
      return end == wait_end::peer_dead ? result::peer_failed : result::deadline_unsent;
    }
    complete(entry);
  }
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  // Eager keeps one sender's messages in order and lets the receiver keep the data in place.
  param.flags = UCP_AM_SEND_FLAG_EAGER;
  if (buffer.empty()) {
    param.op_attr_mask |= UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
    void* request = ucp_am_send_nbx(endpoint, am_id, header.data(), header.size(),
                                    closure.data(), closure.size(), &param);
    if (request == nullptr) return result::sent;
    // UCX documents that FORCE_IMM_CMPL never returns a request.
    if (!UCS_PTR_IS_ERR(request) || UCS_PTR_STATUS(request) != UCS_ERR_NO_RESOURCE) {
      return result::error;
    }
    param.op_attr_mask &= ~static_cast<std::uint32_t>(UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL);
  }
  const std::span<const std::byte> parts[] = {header, closure, buffer};
  fill(entry, parts);
  // UCX reads the header and the data until the request completed: both are in the entry.
  void* request = ucp_am_send_nbx(endpoint, am_id, entry.bytes.data(), header.size(),
                                  entry.bytes.data() + header.size(),
                                  entry.bytes.size() - header.size(), &param);
  if (request == nullptr) return result::sent;
  if (UCS_PTR_IS_ERR(request)) return result::error;
  entry.request = request;
  const wait_end end = wait.call(wait.caller_wait, request);
  if (end != wait_end::completed) {
    return end == wait_end::peer_dead ? result::peer_failed : result::queued_at_deadline;
  }
  const ucs_status_t status = ucp_request_check_status(request);
  complete(entry);
  return status == UCS_OK ? result::sent : result::error;
}

staged_sends::staged& staged_sends::of(int process) {
  const auto index = static_cast<std::size_t>(process);
  if (index >= entries_.size()) entries_.resize(index + 1);
  return entries_[index];
}

void staged_sends::fill(staged& entry, std::span<const std::span<const std::byte>> parts) {
  std::size_t size = 0;
  for (auto part : parts) size += part.size();
  entry.bytes.resize(size);
  std::byte* out = entry.bytes.data();
  for (auto part : parts) {
    if (part.empty()) continue;
    std::memcpy(out, part.data(), part.size());
    out += part.size();
  }
}

void staged_sends::complete(staged& entry) noexcept {
  ucp_request_free(entry.request);
  entry.request = nullptr;
  if (entry.bytes.capacity() > kept_capacity) std::vector<std::byte>().swap(entry.bytes);
}

void staged_sends::release_requests() noexcept {
  for (auto& entry : entries_) {
    if (entry.request != nullptr) ucp_request_free(entry.request);
    entry.request = nullptr;
  }
  for (auto& operation : left_) {
    if (operation.request != nullptr) ucp_request_free(operation.request);
    operation.request = nullptr;
  }
}

void staged_sends::leave(int process, std::vector<std::byte> bytes, void* request) {
  leave(process, std::make_shared<const std::vector<std::byte>>(std::move(bytes)), request);
}

void staged_sends::leave(int process, std::shared_ptr<const void> keeper, void* request) {
  left_.push_back({process, std::move(keeper), request});
}

bool staged_sends::left_in_flight(int process) noexcept {
  bool in_flight = false;
  std::erase_if(left_, [&](left_operation& operation) {
    if (operation.request != nullptr &&
        ucp_request_check_status(operation.request) == UCS_INPROGRESS) {
      in_flight = in_flight || operation.process == process;
      return false;
    }
    if (operation.request != nullptr) ucp_request_free(operation.request);
    return true;
  });
  return in_flight;
}

std::size_t staged_sends::in_flight() const noexcept {
  std::size_t count = 0;
  for (const auto& entry : entries_) count += entry.request != nullptr ? 1 : 0;
  return count;
}

}  // namespace seriema::fabric::detail
