// The names of every layer's SERIEMA_* settings, known to the base layer even where a program
// does not link the layer, so that one environment can serve a job of several programs: a
// setting of another layer is noted, a name no layer has is refused as a typo. Each list
// repeats the names of the table its layer registers (src/<layer>/settings.cpp), in its order;
// tests/unit/base/setting_names_test.cpp fails, naming what to add or remove, when they differ.
#include <seriema/base/settings.hpp>

namespace seriema::config {
namespace {

constexpr std::string_view transfer_names[] = {
    "SERIEMA_PAGES",        "SERIEMA_MEMORY_SOURCE",       "SERIEMA_SEGMENT_SIZE",
    "SERIEMA_ARENA_LIMIT",  "SERIEMA_COMPLETION_INTERVAL", "SERIEMA_PEER_ERRORS",
    "SERIEMA_KEEPALIVE",
};

constexpr std::string_view fabric_names[] = {
    "SERIEMA_BOOTSTRAP_TIMEOUT", "SERIEMA_THREADS",      "SERIEMA_HYPERTHREADS",
    "SERIEMA_PROCESS_ZONES",     "SERIEMA_NET_DEVICES",  "SERIEMA_SERVICE_THREADS",
    "SERIEMA_HELPER_THREADS",    "SERIEMA_ATTACH_SLOTS", "SERIEMA_SEND_LIMIT",
    "SERIEMA_FUNCTION_IDS",      "SERIEMA_REPLY_CELLS",  "SERIEMA_TIMEOUT",
    "SERIEMA_COUNTERS",          "SERIEMA_BIND",         "SERIEMA_RUN_SOCKET",
    "SERIEMA_RUN_RANK",          "SERIEMA_RUN_SIZE",     "SERIEMA_RUN_MACHINE",
    "SERIEMA_RUN_MACHINES",      "SERIEMA_RUN_ISOLATED",
};

constexpr std::string_view invoke_names[] = {
    "SERIEMA_CHUNK_SIZE",      "SERIEMA_CHUNKS_PER_ALLOCATION", "SERIEMA_MAX_CHUNKS",
    "SERIEMA_FLUSH_SIZE",      "SERIEMA_EXCEEDING_LIMIT",       "SERIEMA_EXCEEDING_COPY",
    "SERIEMA_STAGING_SIZE",    "SERIEMA_REMOTE_PUBLISH",        "SERIEMA_REMOTE_NOTICES",
};

constexpr std::string_view offload_names[] = {
    "SERIEMA_OFFLOAD_EXECUTORS",
    "SERIEMA_OFFLOAD_METHOD",
};

constexpr layer_setting_names every_layer[] = {
    {"transfer", transfer_names},
    {"fabric", fabric_names},
    {"invoke", invoke_names},
    {"offload", offload_names},
};

}  // namespace

std::span<const layer_setting_names> every_layer_setting_names() noexcept { return every_layer; }

}  // namespace seriema::config
