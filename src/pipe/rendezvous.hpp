// Opening and closing a pipe end (src/pipe/rendezvous.cpp): begin_open sends this end's hello,
// end_open waits for the peer's, close_end tells the peer and retires this end's region.
#pragma once

#include "ends.hpp"

namespace seriema::pipe::detail {

/// Validates the options and the peer, takes the pipe's key, allocates this end's region
/// (`region_bytes`, zeroed, in this thread's zone) and sends the hello. Throws config_error or
/// seriema::error (nothing left behind).
opening begin_open(fabric::thread_context& ctx, fabric::thread_id peer,
                   const pipe_options& options, role as, std::uint64_t region_bytes);
/// Waits (serving calls) for the peer's hello until `deadline` (or the deadline in force) and
/// checks it. On failure closes this end (close_end) and throws deadline_error (the peer did not
/// come) or seriema::error (it died, or disagrees on the options).
hello end_open(opening& o, role as, fabric::deadline_clock::time_point deadline);
/// Tells the peer this end closed (`totals`: the writer's) and hands the region to the layer,
/// which frees it once the peer closed too or died.
void close_end(opening& o, role as, stream_totals totals) noexcept;

}  // namespace seriema::pipe::detail
