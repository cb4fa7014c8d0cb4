// What the runtime's own source files share beyond the public header: the transfer layer's UCX
// objects the runtime holds (complete types), the fabric's messages, and the active-message
// handlers registered on the process worker.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <string>
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

// quiesce()'s state in one process (quiesce.cpp). Its workers arrive (`arrived`, acq_rel); the
// last to arrive leads: it asks the others to flush (`flush_round`, release, after resetting
// `flushed`), waits until each did (`flushed`, acq_rel), sums the job's sent and consumed
// messages with the runtime's collectives, and repeats until two rounds agree and nothing is in
// flight; then it resets `arrived` and bumps `generation` (release), which lets the others go.
// A failure (a dead rank, a deadline) is written under failure_mutex before `broken` is set
// (release): every later quiesce throws it, as the collectives do once broken.
struct runtime::quiescence {
  std::atomic<int> arrived{0};
  std::atomic<std::uint64_t> generation{0};
  std::atomic<std::uint64_t> flush_round{0};
  std::atomic<int> flushed{0};
  std::mutex failure_mutex;
  std::string failure;
  std::atomic<bool> broken{false};
};

// One attach slot (attach.cpp). `held`: taken by CAS false -> true by the attaching thread, given
// back (release) by the same thread when it detaches. `context`: made by the slot's first holder,
// read and used only by the holder, or by a helper thread while the slot is offered to helpers
// (the poller word orders the hand-over); destroyed at teardown.
struct runtime::attach_slot {
  std::atomic<bool> held{false};
  std::unique_ptr<thread_context> context;
  // Set (release) once `context` exists; never cleared before teardown. Read by the receive
  // path (acquire): calls to a slot never opened are refused.
  std::atomic<bool> opened{false};
};

}  // namespace seriema::fabric
