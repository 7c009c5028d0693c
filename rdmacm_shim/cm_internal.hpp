// What the rest of the shim (rsockets) needs from cma.cpp beyond the public
// rdma_cm API: librdmacm's own rsocket.c calls the library-internal
// ucma_complete and the per-device PD, and so does urnic's. Not exported
// (the version script keeps every symbol not in librdmacm.symbols local).
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

namespace urnic::rdmacm {

// A synchronous id (created without an event channel) waits for the event
// of the call it made last (ucma_complete): 0 with id->event set, or -1
// with errno (EAGAIN/EWOULDBLOCK when its channel fd is non-blocking and
// the event has not come yet; ECONNREFUSED for REJECTED; else the event's
// status).
int complete_sync(rdma_cm_id* id);

// The device's default protection domain (librdmacm gives every id bound
// to a device the device's PD in id->pd).
ibv_pd* device_pd(ibv_context* verbs);

}  // namespace urnic::rdmacm
