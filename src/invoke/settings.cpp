// The invoke layer's SERIEMA_* settings (messengers and aggregators).
#include <seriema/invoke/channel.hpp>
#include <seriema/invoke/detail/settings.hpp>

namespace seriema::invoke::detail {
namespace {

constexpr config::setting table[] = {
    // invoke: one-sided channels (messengers and aggregators)
    {"SERIEMA_CHUNK_SIZE", "2M",
     "bytes of one messenger chunk in the receiver's zone, header included (8K..2M)"},
    {"SERIEMA_CHUNKS_PER_ALLOCATION", "2", "chunks obtained per allocation service call (1..8)"},
    {"SERIEMA_MAX_CHUNKS", "8", "most chunks one messenger may hold (its ring's maximum)"},
    {"SERIEMA_FLUSH_SIZE", "auto",
     "traditional aggregation: bytes batched before a publish; auto: 4K, or 32K where batches "
     "travel as write messages (tcp)"},
    {"SERIEMA_EXCEEDING_LIMIT", "64M",
     "bytes of calls one messenger may queue locally (overflow aggregation, RetryAsync)"},
    {"SERIEMA_EXCEEDING_COPY", "auto",
     "how queued calls go to another machine: auto (the queue is registered memory and records "
     "are put or sent from it, serialized once), always (heap queue, each record copied into a "
     "staging unit first)"},
    {"SERIEMA_STAGING_SIZE", "256K",
     "bytes of one registered staging unit for calls to other machines; a one-sided record is "
     "at most this minus 64 bytes (4K..2M)"},
    {"SERIEMA_REMOTE_PUBLISH", "auto",
     "how calls staged for another machine are published: put (batch, fence, word), message "
     "(one write message the receiver applies; tcp), auto (message unless an RDMA transport)"},
    {"SERIEMA_REMOTE_NOTICES", "auto",
     "how a receiver on another machine reports consumption (released chunks, synchronizers): "
     "atomic (one-sided add), message (active message), auto (atomic only with an RDMA "
     "transport; UCX emulates atomics over tcp)"},
};

}  // namespace

std::span<const config::setting> settings() noexcept { return table; }

void validate_settings(config::problems& found) {
  found.check([] { (void)messenger_options::from_environment(); });
}

}  // namespace seriema::invoke::detail
