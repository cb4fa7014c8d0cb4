// The dsm layer of each worker: its handles on the peers' regions of every space it used, kept
// with the thread's context so that they go (publishers drained) while the context still works.
#include <fmt/format.h>

#include <map>
#include <seriema/base/error.hpp>
#include <seriema/fabric/detail/thread_extension.hpp>
#include <seriema/fabric/runtime.hpp>

#include "faults.hpp"
#include "space_state.hpp"

namespace seriema::dsm::detail {

namespace {

class dsm_layer final : public fabric::thread_extension {
 public:
  /// Made on the worker's own thread (its context's constructor), which is the thread whose
  /// faults it serves.
  explicit dsm_layer(fabric::thread_context& self) {
    set_wants_poll(false);  // nothing arrives for it: spaces are one-sided
    set_worker_context(&self);
  }
  ~dsm_layer() override { set_worker_context(nullptr); }
  std::size_t poll(fabric::thread_context&) override { return 0; }
  void flush(fabric::thread_context&) override {}
  void peers_failed(fabric::thread_context&) override {}

  /// Space id -> handles by process. Owner thread only.
  std::map<std::uint64_t, std::vector<peer_handles>> handles;
};

std::unique_ptr<fabric::thread_extension> make_layer(fabric::thread_context& self) {
  return std::make_unique<dsm_layer>(self);
}

const std::size_t registered = fabric::register_thread_layer(
    {"dsm", fabric::layer_slot::dsm, fabric::layer_scope::workers, &make_layer});

}  // namespace

}  // namespace seriema::dsm::detail

namespace seriema::dsm {

detail::peer_handles& detail::space_state::peer(fabric::thread_context& self, int process) {
  auto* layer = static_cast<detail::dsm_layer*>(self.extension(fabric::layer_slot::dsm));
  if (layer == nullptr) {
    throw error(fmt::format("dsm: thread {} is not a worker of runtime::run (a space is used by "
                            "the workers inside run())",
                            self.id()));
  }
  std::vector<detail::peer_handles>& by_process = layer->handles[id];
  if (by_process.empty()) by_process.resize(layout.processes);
  detail::peer_handles& h = by_process[static_cast<std::size_t>(process)];
  if (!h.words) {
    h.words = std::make_unique<fabric::detail::remote_words>(self, meta_of[process]);
  }
  if (process != rank && !h.public_copy) {
    h.public_copy = std::make_unique<fabric::detail::region_publisher>(self, public_of[process],
                                                                       route, 4);
    h.board = std::make_unique<fabric::detail::region_publisher>(self, meta_of[process], route, 4);
  }
  return h;
}

}  // namespace seriema::dsm
