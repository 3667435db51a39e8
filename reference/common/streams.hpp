// Streams, copies, host callbacks and graphs (capabilities `stream`, `copy`, `graph`): the ABI
// entries' argument checks and refusals, written once for every platform over its step tables.
// A platform supplies StreamOps and GraphOps (each `stream.cpp`, `copy.cpp`, `graph.cpp`): the
// steps run only on checked arguments; what a step refuses it records itself, with the driver's
// native code and the driver call that answered (the platform's driver_fail).
//
// A broken backend of the self-test replaces one step of a platform's table
// (conformance/broken/stream_steps.hpp): the bug sits in that step and nowhere else.
#pragma once
#include "copy_desc.hpp"
#include "errors.hpp"
#include "memory_book.hpp"

#include <xmc/backend.h>

namespace xmc::be {

// The refusal of a handle that no live object of `what` (stream, event, graph) of this instance has.
inline xmc_status bad_handle(xmc_instance *inst, const char *call, const char *what, const void *handle) {
    return fail(inst, XMC_ERR_INVALID_HANDLE, 0, call, "%s: %p is not a live %s of this instance", call, handle,
                what);
}
inline xmc_status bad_stream(xmc_instance *inst, const char *call, const void *h) {
    return bad_handle(inst, call, "stream", h);
}
inline xmc_status bad_event(xmc_instance *inst, const char *call, const void *h) {
    return bad_handle(inst, call, "event", h);
}
inline xmc_status bad_graph(xmc_instance *inst, const char *call, const void *h) {
    return bad_handle(inst, call, "graph", h);
}

// A handle that is a heap cookie of one byte: unique while live, never dereferenced.
template <class H> H *new_cookie() { return reinterpret_cast<H *>(new char); }
template <class H> void free_cookie(H *h) { delete reinterpret_cast<char *>(h); }

struct StreamOps {
    // The driver, its stream entry points and the device index: unsupported with the reason
    // where no driver answers (no native code: none answered), no device for a bad index.
    xmc_status (*ready)(xmc_instance *inst, int32_t device, const char *call);
    // The driver and its copy entry points, as `ready` (a copy names no device of its own).
    xmc_status (*ready_copy)(xmc_instance *inst);
    // The devices a copy's DEVICE side may name (COPY-STRIDED, copy_desc.hpp).
    int32_t (*device_count)();
    // A live stream of the instance (the copy's stream is refused before the slots are asked).
    bool (*live_stream)(xmc_instance *inst, xmc_stream *s);
    // VMM-UNMAPPED-FAULTS: a copy into or out of a slot's unmapped range is refused.
    xmc_status (*copy_slots)(xmc_instance *inst, const CopySpan (&spans)[2]);
    // COPY-STRIDED: enqueues the checked descriptor on `s`, or records it while `s` captures
    // (GRAPH-CAPTURE); the caller's descriptor may go away once this returns.
    xmc_status (*enqueue_copy)(xmc_instance *inst, const xmc_copy_desc &d, xmc_stream *s);
    // Makes a stream, an event or device memory of a checked device; *out is set on success only.
    xmc_status (*create_stream)(xmc_instance *inst, int32_t device, xmc_stream **out);
    xmc_status (*create_event)(xmc_instance *inst, int32_t device, xmc_event **out);
    xmc_status (*alloc_device)(xmc_instance *inst, int32_t device, size_t bytes, void **out);
    // COPY-ORDER: enqueues fn(user) on `s` after its earlier work (recorded while it captures).
    xmc_status (*enqueue_callback)(xmc_instance *inst, xmc_stream *s, xmc_host_fn fn, void *user);
};

inline xmc_status stream_create(const StreamOps &ops, xmc_instance *inst, int32_t device, xmc_stream **out) {
    if (!out) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "stream_create", "stream_create: result pointer is NULL");
    if (xmc_status st = ops.ready(inst, device, "stream_create"); st != XMC_OK) return st;
    return ops.create_stream(inst, device, out);
}

inline xmc_status event_create(const StreamOps &ops, xmc_instance *inst, int32_t device, xmc_event **out) {
    if (!out) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "event_create", "event_create: result pointer is NULL");
    if (xmc_status st = ops.ready(inst, device, "event_create"); st != XMC_OK) return st;
    return ops.create_event(inst, device, out);
}

inline xmc_status dev_alloc(const StreamOps &ops, xmc_instance *inst, int32_t device, size_t bytes, void **out) {
    if (!out) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "dev_alloc", "dev_alloc: result pointer is NULL");
    if (bytes == 0) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "dev_alloc", "dev_alloc: size is 0");
    if (xmc_status st = ops.ready(inst, device, "dev_alloc"); st != XMC_OK) return st;
    const xmc_status st = ops.alloc_device(inst, device, bytes, out);
    // AFF-PREPARED-STALE: a new serial, also at a freed allocation's address (each dev_free
    // removes it).
    if (st == XMC_OK) book_add(reinterpret_cast<uintptr_t>(*out), bytes, MemKind::Device);
    return st;
}

inline xmc_status host_callback(const StreamOps &ops, xmc_instance *inst, xmc_stream *s, xmc_host_fn fn,
                                void *user) {
    if (!fn) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "host_callback", "host_callback: function is NULL");
    return ops.enqueue_callback(inst, s, fn, user);
}

// COPY-STRIDED: the whole descriptor is checked before anything is enqueued, so every platform
// refuses exactly the same descriptors; then the stream, then the slots it touches.
inline xmc_status copy(const StreamOps &ops, xmc_instance *inst, const xmc_copy_desc *desc, xmc_stream *s) {
    if (xmc_status st = ops.ready_copy(inst); st != XMC_OK) return st;
    CopySpan spans[2];
    if (xmc_status st = check_copy(inst, desc, ops.device_count(), spans); st != XMC_OK) return st;
    if (!ops.live_stream(inst, s)) return bad_stream(inst, "copy", s);
    if (xmc_status st = ops.copy_slots(inst, spans); st != XMC_OK) return st;
    return ops.enqueue_copy(inst, *desc, s);
}

struct GraphOps {
    // The driver and its graph entry points (unsupported with the reason where missing).
    xmc_status (*ready)(xmc_instance *inst, const char *call);
    // GRAPH-CAPTURE: starts recording the copies and host callbacks of `s`.
    xmc_status (*begin)(xmc_instance *inst, xmc_stream *s);
    // Ends the capture of `s` into a graph; *out is set on success only.
    xmc_status (*end)(xmc_instance *inst, xmc_stream *s, xmc_graph **out);
    // Runs the graph on `s` after its earlier work and before its later work.
    xmc_status (*launch)(xmc_instance *inst, xmc_graph *g, xmc_stream *s);
    // Frees the graph once no launch of it runs any more.
    xmc_status (*destroy)(xmc_instance *inst, xmc_graph *g);
};

inline xmc_status graph_begin(const GraphOps &ops, xmc_instance *inst, xmc_stream *s) {
    if (xmc_status st = ops.ready(inst, "graph_begin"); st != XMC_OK) return st;
    return ops.begin(inst, s);
}

inline xmc_status graph_end(const GraphOps &ops, xmc_instance *inst, xmc_stream *s, xmc_graph **out) {
    if (!out) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "graph_end", "graph_end: result pointer is NULL");
    if (xmc_status st = ops.ready(inst, "graph_end"); st != XMC_OK) return st;
    return ops.end(inst, s, out);
}

} // namespace xmc::be

// A platform's StreamOps, `stream_ops()` (one per library: a broken backend replaces a step before
// the first call), with the steps in the struct's order, and the entries that are the same on
// every platform over it: copy, and the creating entries' argument checks.
#define XMC_STREAM_OPS(...)                                                                         \
    ::xmc::be::StreamOps &stream_ops() {                                                            \
        static ::xmc::be::StreamOps ops{__VA_ARGS__};                                               \
        return ops;                                                                                 \
    }                                                                                               \
    xmc_status copy(xmc_instance *inst, const xmc_copy_desc *desc, xmc_stream *s) {                 \
        return ::xmc::be::copy(stream_ops(), inst, desc, s);                                        \
    }                                                                                               \
    xmc_status stream_create(xmc_instance *inst, int32_t device, xmc_stream **out) {                \
        return ::xmc::be::stream_create(stream_ops(), inst, device, out);                           \
    }                                                                                               \
    xmc_status event_create(xmc_instance *inst, int32_t device, xmc_event **out) {                  \
        return ::xmc::be::event_create(stream_ops(), inst, device, out);                            \
    }                                                                                               \
    xmc_status dev_alloc(xmc_instance *inst, int32_t device, size_t bytes, void **out) {            \
        return ::xmc::be::dev_alloc(stream_ops(), inst, device, bytes, out);                        \
    }                                                                                               \
    xmc_status host_callback(xmc_instance *inst, xmc_stream *s, xmc_host_fn fn, void *user) {       \
        return ::xmc::be::host_callback(stream_ops(), inst, s, fn, user);                           \
    }

// A platform's GraphOps, `graph_ops()`, from its steps ready, begin, end, launch, destroy, and the
// GRAPH entries over it.
#define XMC_GRAPH_OPS(...)                                                                          \
    ::xmc::be::GraphOps &graph_ops() {                                                              \
        static ::xmc::be::GraphOps ops{__VA_ARGS__};                                                \
        return ops;                                                                                 \
    }                                                                                               \
    xmc_status graph_begin(xmc_instance *inst, xmc_stream *s) {                                     \
        return ::xmc::be::graph_begin(graph_ops(), inst, s);                                        \
    }                                                                                               \
    xmc_status graph_end(xmc_instance *inst, xmc_stream *s, xmc_graph **out) {                      \
        return ::xmc::be::graph_end(graph_ops(), inst, s, out);                                     \
    }                                                                                               \
    xmc_status graph_launch(xmc_instance *inst, xmc_graph *g, xmc_stream *s) {                      \
        return graph_ops().launch(inst, g, s);                                                      \
    }                                                                                               \
    xmc_status graph_destroy(xmc_instance *inst, xmc_graph *g) { return graph_ops().destroy(inst, g); }
