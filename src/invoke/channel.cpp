// The channels' names and the messengers' options: messenger_options from the SERIEMA_* settings
// and their checks (include/seriema/invoke/channel.hpp).
#include <fmt/format.h>

#include <seriema/base/enum_names.hpp>
#include <seriema/base/error.hpp>
#include <seriema/base/settings.hpp>
#include <seriema/invoke/channel.hpp>
#include <seriema/invoke/detail/settings.hpp>
#include <seriema/invoke/detail/wire.hpp>
#include <seriema/transfer/memory.hpp>

namespace seriema::invoke {

const char* to_string(channel c) noexcept {
  static constexpr enum_name_entry<channel> names[] = {
      {channel::send, "send"},
      {channel::write, "write"},
      {channel::trad, "trad"},
      {channel::ovfl, "ovfl"},
      {channel::adaptive, "adaptive"},
  };
  return name_in(names, c);
}

std::optional<channel> channel_from_string(std::string_view name) noexcept {
  for (channel c :
       {channel::send, channel::write, channel::trad, channel::ovfl, channel::adaptive}) {
    if (name == to_string(c)) return c;
  }
  return std::nullopt;
}

namespace {

// SERIEMA_FLUSH_SIZE: 0 for auto (unset, or "auto"), else the size.
std::size_t flush_size_from_environment() {
  const std::optional<std::string> flush = config::raw("SERIEMA_FLUSH_SIZE");
  if (!flush || *flush == "auto") return 0;
  try {
    return config::parse_bytes("SERIEMA_FLUSH_SIZE", *flush);
  } catch (const config_error&) {
    throw config_error(fmt::format(
        "SERIEMA_FLUSH_SIZE={}: expected auto or a size such as 4096, 32K or 64K", *flush));
  }
}

}  // namespace

messenger_options messenger_options::from_environment() {
  config::problems found;  // every setting read, so that one message names every problem
  messenger_options options;
  found.check([&] { options.chunk_size = config::get_bytes("SERIEMA_CHUNK_SIZE"); });
  found.check([&] {
    options.chunks_per_allocation = static_cast<std::uint32_t>(
        config::get_unsigned("SERIEMA_CHUNKS_PER_ALLOCATION", 1, max_chunks_per_allocation));
  });
  found.check([&] {
    options.max_chunks =
        static_cast<std::uint32_t>(config::get_unsigned("SERIEMA_MAX_CHUNKS", 1, 4096));
  });
  found.check([&] { options.flush_size = flush_size_from_environment(); });
  found.check([&] { options.exceeding_limit = config::get_bytes("SERIEMA_EXCEEDING_LIMIT"); });
  found.check([&] { options.staging_size = config::get_bytes("SERIEMA_STAGING_SIZE"); });
  static constexpr std::string_view publish_choices[] = {"auto", "put", "message"};
  found.check([&] {
    options.publish_remote =
        static_cast<remote_publish>(config::get_choice("SERIEMA_REMOTE_PUBLISH", publish_choices));
  });
  static constexpr std::string_view notice_choices[] = {"auto", "atomic", "message"};
  found.check([&] {
    options.notices_remote =
        static_cast<remote_notice>(config::get_choice("SERIEMA_REMOTE_NOTICES", notice_choices));
  });
  static constexpr std::string_view copy_choices[] = {"auto", "always"};
  found.check([&] {
    options.copy_exceeding =
        static_cast<exceeding_copy>(config::get_choice("SERIEMA_EXCEEDING_COPY", copy_choices));
  });
  // Contradictions between values, once every value parsed (a default standing in for a bad
  // value would make them up).
  if (found.empty()) found.check([&] { options.validate(); });
  found.throw_if_any();
  return options;
}

void messenger_options::validate() const {
  config::problems found;
  const bool chunk_ok =
      chunk_size >= 8192 && chunk_size <= transfer::block_size && chunk_size % 4096 == 0;
  if (!chunk_ok) {
    found.add(fmt::format("SERIEMA_CHUNK_SIZE={}: expected a multiple of 4K between 8K and 2M",
                          chunk_size));
  }
  if (chunks_per_allocation < 1 || chunks_per_allocation > max_chunks_per_allocation) {
    found.add(fmt::format("SERIEMA_CHUNKS_PER_ALLOCATION={}: expected 1..{}",
                          chunks_per_allocation, max_chunks_per_allocation));
  }
  if (max_chunks < chunks_per_allocation) {
    found.add(fmt::format(
        "SERIEMA_MAX_CHUNKS={}: must be at least SERIEMA_CHUNKS_PER_ALLOCATION ({})", max_chunks,
        chunks_per_allocation));
  }
  if (chunk_ok && flush_size != 0 &&
      (flush_size < 64 || flush_size > chunk_size - wire::chunk_header_size)) {
    found.add(fmt::format(
        "SERIEMA_FLUSH_SIZE={}: expected auto or 64 bytes .. the chunk's data area ({} bytes)",
        flush_size, chunk_size - wire::chunk_header_size));
  }
  if (exceeding_limit < 4096) {
    found.add(fmt::format("SERIEMA_EXCEEDING_LIMIT={}: expected at least 4K", exceeding_limit));
  }
  if (staging_size < 4096 || staging_size > transfer::block_size) {
    found.add(fmt::format("SERIEMA_STAGING_SIZE={}: expected 4K .. 2M", staging_size));
  }
  found.throw_if_any();
}

}  // namespace seriema::invoke
