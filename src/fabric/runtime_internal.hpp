// What the runtime's own source files share beyond the public header: the transfer layer's UCX
// objects the runtime holds (complete types), the fabric's messages, and the active-message
// handlers registered on the process worker.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <seriema/fabric/detail/messages.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/transfer/allocators.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/shared_region.hpp>
#include <seriema/transfer/ucx.hpp>

namespace seriema::fabric {

// UCX calls these on whichever thread progresses the process worker; `arg` is the runtime.
// Each checks its input before anything runs (runtime_handlers.cpp, runtime_collectives.cpp).
struct runtime::am_handlers {
  static ucs_status_t on_barrier_message(void* arg, const void* header, std::size_t header_length,
                                         void* data, std::size_t length,
                                         const ucp_am_recv_param_t* param);
  static ucs_status_t on_call_message(void* arg, const void* header, std::size_t header_length,
                                      void* data, std::size_t length,
                                      const ucp_am_recv_param_t* param);
  static ucs_status_t on_feedback_message(void* arg, const void* header, std::size_t header_length,
                                          void* data, std::size_t length,
                                          const ucp_am_recv_param_t* param);
  static ucs_status_t on_write_message(void* arg, const void* header, std::size_t header_length,
                                       void* data, std::size_t length,
                                       const ucp_am_recv_param_t* param);
  static ucs_status_t on_reply_message(void* arg, const void* header, std::size_t header_length,
                                       void* data, std::size_t length,
                                       const ucp_am_recv_param_t* param);
};

}  // namespace seriema::fabric
