// Sending a container's packed batches (detail/packed_batches.hpp).
#include <seriema/containers/detail/packed_batches.hpp>

#include <algorithm>

namespace seriema::containers::detail {

namespace {
// Sets `flag` for its life.
struct raised {
  explicit raised(bool& flag) : flag_(flag) { flag_ = true; }
  ~raised() { flag_ = false; }
  raised(const raised&) = delete;
  raised& operator=(const raised&) = delete;
  bool& flag_;
};
}  // namespace

invoke::call_status packed_batches::flush(void* container, fabric::thread_id dest) {
  batch& b = batches_[dest];
  if (b.flushing || b.bytes.empty()) return invoke::call_status::ok;
  invoke::call_status first = invoke::call_status::ok;
  {
    raised flushing(b.flushing);
    // Each round takes what the batch holds out of it, so that what the sends' waits append
    // lands in the emptied buffers and goes in the next round, after it.
    while (!b.bytes.empty()) {
      b.bytes.swap(b.sending_bytes);
      b.segments.swap(b.sending_segments);
      const invoke::call_status status = send_round(container, dest, b);
      if (first == invoke::call_status::ok) first = status;
    }
  }
  table_.make_progress(self_);
  return first;
}

invoke::call_status packed_batches::send_round(void* container, fabric::thread_id dest, batch& b) {
  invoke::call_status first = invoke::call_status::ok;
  std::size_t begin = 0;
  for (const segment& s : b.sending_segments) {
    // A segment that calls run during a flush grew past the limit goes in several calls.
    const std::size_t piece = std::max<std::size_t>(1, limit_ / s.entry_size) * s.entry_size;
    for (; begin < s.end; begin += std::min(piece, s.end - begin)) {
      const std::size_t size = std::min(piece, s.end - begin);
      const invoke::call_status status =
          s.send(container, dest, {b.sending_bytes.data() + begin, size});
      if (first == invoke::call_status::ok) first = status;
    }
  }
  b.sending_bytes.clear();
  b.sending_segments.clear();
  return first;
}

invoke::call_status packed_batches::flush_all(void* container) {
  invoke::call_status first = invoke::call_status::ok;
  for (std::size_t dest = 0; dest < batches_.size(); ++dest) {
    const invoke::call_status status = flush(container, static_cast<fabric::thread_id>(dest));
    if (first == invoke::call_status::ok) first = status;
  }
  return first;
}

void packed_batches::drop(fabric::thread_id dest) noexcept {
  batches_[dest].bytes.clear();
  batches_[dest].segments.clear();
}

}  // namespace seriema::containers::detail
