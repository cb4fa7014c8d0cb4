// Names of UCX's objects for headers that must not include <ucp/api/ucp.h>: the fabric and invoke
// layers' headers (and the transfer headers they use) hold UCX objects by pointer only, so an
// application that includes them does not see UCX unless it includes <seriema/transfer/ucx.hpp>.
#pragma once

// The struct tags behind UCX's handle typedefs (ucp_def.h: typedef struct ucp_ep* ucp_ep_h, ...):
// `ucp_ep*` here is the same type as `ucp_ep_h` there.
struct ucp_context;
struct ucp_worker;
struct ucp_ep;
struct ucp_rkey;
struct ucp_mem;

namespace seriema::transfer {

class ucx_context;
class ucx_worker;
class ucx_endpoint;
class arena;
class shared_region;
class general_allocator;

// UCX's ucs_status_t where <ucp/api/ucp.h> is not included: the same value (0 is UCS_OK, errors
// are negative); static_cast<ucs_status_t>(s) gives it back, ucs_status_string() prints it.
using ucx_status_code = int;

}  // namespace seriema::transfer
