// The containers layer's registration and its per-thread table (late operations, counters).
#include <fmt/format.h>

#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/containers/detail/container_table.hpp>

namespace seriema::containers::detail {
namespace {

std::unique_ptr<fabric::thread_extension> make_table(thread_context&) {
  return std::make_unique<container_table>();
}

// Registered before main: every worker's context gets a table (attached threads do not own
// partitions).
const std::size_t registered = fabric::register_thread_layer(
    {"containers", fabric::layer_slot::containers, fabric::layer_scope::workers, &make_table});

}  // namespace

void container_table::late_operation(std::uint32_t id) noexcept {
  if (dropped_++ != 0) return;
  try {
    log::error("containers: an operation reached container {} of this thread, which does not "
               "exist here (already destroyed: call barrier() before a container goes; or the "
               "threads made their containers in different orders); it was dropped, and later "
               "ones are only counted (counters: containers.dropped)",
               id);
  } catch (...) {  // the log is best effort
  }
}

void container_table::refuse(const char* kind, std::size_t limit) noexcept {
  if (refused_++ != 0) return;
  try {
    log::error("containers: a {} part of this thread holds its bound of {} keys "
               "(limits::max_local_entries): an operation adding a key was refused; later ones "
               "are only counted (counters: containers.refused)",
               kind, limit);
  } catch (...) {  // the log is best effort
  }
}

void container_table::make_progress(thread_context& self) {
  if (making_progress_) return;
  making_progress_ = true;
  struct lower_on_return {
    bool& flag;
    ~lower_on_return() { flag = false; }
  } lower{making_progress_};
  thread_context::deferring_scope keep_exceptions(self);
  (void)self.poll();
}

std::string container_table::counters_json() const {
  return fmt::format(R"({{"dropped":{},"refused":{}}})", dropped_, refused_);
}

container_table& containers_of(thread_context& self) {
  fabric::thread_extension* layer = self.extension(fabric::layer_slot::containers);
  if (layer == nullptr) {
    throw error(fmt::format("thread {} has no containers: they are made and used by the "
                            "workers of runtime::run",
                            self.id()));
  }
  return static_cast<container_table&>(*layer);
}

}  // namespace seriema::containers::detail
