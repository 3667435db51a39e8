/* xmc backend ABI: the C interface every backend exports.
 *
 * A backend is a shared library exporting one symbol, XMC_BACKEND_ENTRY_SYMBOL
 * ("xmc_backend_entry"), of type xmc_backend_entry_fn. It returns a table of
 * function pointers (xmc_backend) with the ABI version, a name, a version
 * string and a capability set. The runner loads in-tree and vendor backends
 * the same way (dlopen).
 *
 * Versioning: XMC_ABI_VERSION changes only when an existing member changes
 * meaning. New members are appended to the end of xmc_backend; `struct_size`
 * says how many bytes of the table the backend filled, so an older backend
 * loaded by a newer runner reports the missing members as unsupported.
 *
 * Capabilities are declared, never guessed: the suite runs a requirement only
 * when the backend declares its capability, and reports it `unsupported` with
 * the capability's name otherwise. Entry points of an undeclared capability may
 * be NULL.
 *
 * Errors: every entry point returns an xmc_status. On failure the backend
 * records the detail (status, the native driver result code if any, the name
 * of the failing call and a message) in a per-thread, per-instance slot read
 * by `last_error`. A failed call changes nothing (no half-done state).
 *
 * Thread safety: every entry point may be called from any thread at once,
 * except `close` (no other call on that instance may be in flight) and
 * the object-destroy calls for the object being destroyed. Host callbacks
 * enqueued on a stream run on a backend-owned thread and must not call the
 * backend's driver (VMM-CALLBACK); they may call the backend's API only
 * where this header says so.
 */
#ifndef XMC_BACKEND_H
#define XMC_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XMC_ABI_VERSION 1u
#define XMC_BACKEND_ENTRY_SYMBOL "xmc_backend_entry"

#if defined(__GNUC__)
#define XMC_EXPORT __attribute__((visibility("default")))
#else
#define XMC_EXPORT
#endif

/* ---- status codes: one per refusal class (SPEC 3) ---------------------- */
typedef enum xmc_status {
    XMC_OK = 0,
    XMC_ERR_INVALID_ARGUMENT = 1,   /* null, zero size, bad alignment, bad flags */
    XMC_ERR_NOT_PINNED_BASE = 2,    /* free/ref of an address that is no live pinned base */
    XMC_ERR_ALREADY_REGISTERED = 3, /* range overlaps a registered range */
    XMC_ERR_NOT_REGISTERED = 4,     /* unregister of anything but a registered base */
    XMC_ERR_NON_IDENTITY = 5,       /* driver mapped host memory at another device address */
    XMC_ERR_MEMLOCK = 6,            /* locking would exceed RLIMIT_MEMLOCK */
    XMC_ERR_UNSUPPORTED = 7,        /* capability, driver, device or extension missing */
    XMC_ERR_BUSY = 8,               /* work in flight / state does not allow the call */
    XMC_ERR_DUPLICATE_IN_BATCH = 9, /* a batch names one object twice */
    XMC_ERR_DRIVER = 10,            /* the native driver failed; see native_code */
    XMC_ERR_OUT_OF_MEMORY = 11,     /* host or device memory exhausted */
    XMC_ERR_INVALID_HANDLE = 12,    /* handle never issued, or already closed */
    XMC_ERR_TIMEOUT = 13,           /* a bounded wait ran out */
    XMC_ERR_REFUSED = 14,           /* a transfer request was refused by validation/agreement */
    XMC_ERR_PEER_FAILED = 15,       /* another rank of the group failed */
    XMC_ERR_NO_DEVICE = 16,         /* device index out of range */
    XMC_ERR_TOO_LARGE = 17,         /* above a per-call limit the backend declares and does not split (0.2) */
    XMC_ERR_CAPTURING = 18,         /* the stream is capturing a graph, which the call may not join (0.2) */
    XMC_ERR_STALE = 19,             /* a prepared transfer's buffer was freed, replaced or released since prepare (0.3) */
    XMC_STATUS_COUNT_ = 20
} xmc_status;

/* ---- capabilities ------------------------------------------------------ */
typedef uint64_t xmc_caps;
#define XMC_CAP_PIN          (1ull << 0)
#define XMC_CAP_PIN_REFS     (1ull << 1)
#define XMC_CAP_PIN_REGISTER (1ull << 2)
#define XMC_CAP_REGISTER     (1ull << 3)
#define XMC_CAP_STREAM       (1ull << 4)
#define XMC_CAP_COPY         (1ull << 5)
#define XMC_CAP_VMM          (1ull << 6)
#define XMC_CAP_TRANSFER     (1ull << 7)
#define XMC_CAP_GRAPH        (1ull << 8)   /* (0.2) stream capture into graphs, and their launch */
#define XMC_CAP_REGISTER_PORTABLE (1ull << 9)  /* (0.2) reg_register with XMC_REG_PORTABLE: every device */
/* (0.2) pages pinned by the device driver, not by mlock: "locked" means the
 * driver reports the range page-locked (CUDA: cuMemHostGetFlags succeeds on
 * it), and RLIMIT_MEMLOCK does not apply (PIN-KINDS) */
#define XMC_CAP_PIN_DRIVER   (1ull << 10)
#define XMC_CAP_PIN_CACHE    (1ull << 11)  /* (0.2) free hands a block to the backend's pool (PIN-POOL) */
/* (0.3) prepare a transfer once, run it many times, release it (AFF-PREPARED-*) */
#define XMC_CAP_TRANSFER_PREPARED (1ull << 12)
#define XMC_CAP_COUNT_       13

/* ---- error detail ------------------------------------------------------ */
typedef struct xmc_error_info {
    xmc_status status;
    int64_t native_code;   /* driver result (CUresult, ze_result_t, errno); 0 if none */
    char call[64];         /* the ABI call that failed, e.g. "pin_alloc" */
    char message[384];     /* what was refused and why, naming the native call */
} xmc_error_info;

/* ---- opaque objects ---------------------------------------------------- */
typedef struct xmc_instance xmc_instance;
typedef struct xmc_stream xmc_stream;
typedef struct xmc_prepared xmc_prepared;  /* (0.3) a prepared transfer */
typedef struct xmc_event xmc_event;
typedef struct xmc_slot xmc_slot;
typedef struct xmc_request xmc_request;
typedef struct xmc_graph xmc_graph;  /* (0.2) recorded work of a stream (capability graph) */

typedef struct xmc_open_params {
    uint32_t struct_size;  /* sizeof(xmc_open_params) */
    /* Backend-specific "key=value;key=value" options, may be NULL. Common keys:
     * vmm_workers=N (1 = serial mode, VMM-SERIAL). Unknown keys are refused. */
    const char *options;
} xmc_open_params;

typedef struct xmc_device_info {
    int32_t index;
    uint8_t uuid[16];
    char name[128];
    uint64_t total_memory;
} xmc_device_info;

/* ---- pinning ----------------------------------------------------------- */
#define XMC_NO_DEVICE (-1)

typedef struct xmc_pin_result {
    void *base;
    size_t size;            /* usable bytes, >= the bytes asked for */
    int32_t registered;     /* 1 if registered with the requested device */
    xmc_status reg_status;  /* why not registered (XMC_OK if registered or not asked) */
    int64_t reg_native_code;
} xmc_pin_result;

typedef struct xmc_pin_info {
    int32_t pinned;  /* 1 if the whole queried extent lies inside one live block */
    void *base;      /* owning block (valid when pinned) */
    size_t size;
} xmc_pin_info;

typedef struct xmc_pin_stats {
    uint64_t bytes_now;   /* sum of live blocks' sizes (a pooled block is not live) */
    uint64_t bytes_peak;  /* high-water mark of bytes_now */
    uint64_t blocks_now;
} xmc_pin_stats;

/* (0.2, pin_cache) The backend's pool: blocks freed by their owner that stay
 * pinned, owned by the pool, until handed out again or released. A structure
 * the backend writes never grows (a newer backend would write past an older
 * caller's copy), so the pool's figures are here, not new members of
 * xmc_pin_stats; a later figure comes with a new structure and entry point. */
typedef struct xmc_pin_pool_stats {
    uint64_t bytes_pooled;   /* sum of pooled blocks' sizes */
    uint64_t blocks_pooled;
} xmc_pin_pool_stats;

/* (0.2) What close_report released (PIN-CLOSE, REG-CLOSE). Closing one
 * instance while another is open releases its own objects only (slots);
 * closing the last open one also releases what the process-wide registries
 * still hold: pinned blocks, the pin pool and registrations. */
typedef struct xmc_close_report {
    uint32_t last_instance;   /* 1 when no instance of the backend is left open */
    uint32_t prepared_transfers; /* (0.3) prepared transfers of this instance never released, released now */
    uint64_t pinned_blocks;   /* live pinned blocks released (pages unlocked, registrations with devices released) */
    uint64_t pinned_bytes;    /* their sizes */
    uint64_t registrations;   /* reg_register registrations released */
    uint64_t slots;           /* slots of this instance closed */
} xmc_close_report;

/* ---- registration ------------------------------------------------------ */
/* reg_register flags */
#define XMC_REG_PORTABLE 1u  /* (0.2, register_portable) usable by every device, not only `device` */

typedef enum xmc_reg_align_policy {
    XMC_REG_ALIGN_REFUSE = 0, /* unaligned address or size: XMC_ERR_INVALID_ARGUMENT */
    XMC_REG_ALIGN_ROUND = 1   /* rounded out to pages; the rounded base is recorded */
} xmc_reg_align_policy;

/* (0.2) What reg_register does with a range larger than the driver takes in one
 * call (REG-LARGE), as reg_large_policy declares it. */
typedef enum xmc_reg_large_policy {
    XMC_REG_LARGE_NO_LIMIT = 0, /* no per-call limit: any size goes to the driver in one call */
    XMC_REG_LARGE_SPLIT = 1,    /* split into chunks of at most `limit` bytes, all or nothing; one
                                   registration to reg_query and reg_unregister */
    XMC_REG_LARGE_REFUSE = 2    /* above `limit` bytes: XMC_ERR_TOO_LARGE, the driver never asked */
} xmc_reg_large_policy;

typedef struct xmc_reg_large_info {
    xmc_reg_large_policy policy;
    uint64_t limit;    /* bytes per driver call (SPLIT: the chunk size; REFUSE: the largest
                          accepted size); 0 under NO_LIMIT */
} xmc_reg_large_info;

typedef struct xmc_reg_info {
    int32_t registered;
    void *base;        /* recorded base (rounded under XMC_REG_ALIGN_ROUND) */
    size_t size;       /* recorded size */
    int32_t device;
} xmc_reg_info;

/* ---- streams and copies ------------------------------------------------ */
typedef enum xmc_mem_kind {
    XMC_MEM_HOST = 0,       /* pageable host memory */
    XMC_MEM_PINNED = 1,     /* from pin_alloc */
    XMC_MEM_REGISTERED = 2, /* registered with reg_register */
    XMC_MEM_DEVICE = 3      /* from dev_alloc (or a slot address) */
} xmc_mem_kind;

typedef void (*xmc_host_fn)(void *user);

/* A 3-D strided copy (1-D: height = depth = 1; 2-D: depth = 1). Element
 * (x, y, z) of a side lives at ptr + (z0+z)*slice_pitch + (y0+y)*pitch + x0 + x,
 * with x counted in bytes. Only the described bytes are written. */
typedef struct xmc_copy_side {
    void *ptr;
    xmc_mem_kind kind;
    int32_t device;      /* device of DEVICE memory; ignored otherwise */
    size_t x_bytes;      /* storage offsets */
    size_t y;
    size_t z;
    size_t pitch;        /* bytes between rows, >= width_bytes + x_bytes */
    size_t slice_pitch;  /* bytes between slices, >= pitch * rows used */
} xmc_copy_side;

typedef struct xmc_copy_desc {
    xmc_copy_side src;
    xmc_copy_side dst;
    size_t width_bytes;
    size_t height;
    size_t depth;
} xmc_copy_desc;

/* ---- VMM slots --------------------------------------------------------- */
#define XMC_REMAP_DEFER_COPY 1u

typedef struct xmc_slot_info {
    void *address;        /* fixed for the slot's life (VMM-STABLE) */
    size_t size;          /* requested size rounded up to the granularity */
    int32_t device;
} xmc_slot_info;

typedef struct xmc_request_info {
    int32_t callback_fired;  /* the stream reached the request's point */
    int32_t done;            /* the worker finished (successfully or not) */
    xmc_status status;       /* the request's outcome once done */
    int64_t native_code;     /* driver code of an asynchronous failure */
    uint32_t slots;          /* slots the request covers */
    uint32_t copies_launched;/* reload copies started */
    uint32_t adopted;        /* 1 once adopted */
} xmc_request_info;

/* ---- affine transfer --------------------------------------------------- */
#define XMC_MAX_DIMS 8

/* One segment of a plan, positions within the shards in elements. */
typedef struct xmc_segment {
    int32_t src_rank;
    int32_t tgt_rank;
    int32_t ndim;
    int64_t extents[XMC_MAX_DIMS];
    int64_t src_offset;
    int64_t src_strides[XMC_MAX_DIMS];
    int64_t tgt_offset;
    int64_t tgt_strides[XMC_MAX_DIMS];
} xmc_segment;

typedef struct xmc_plan_view {
    const xmc_segment *segments;
    size_t segment_count;
    uint64_t digest;     /* the planner's digest of the segments and shape */
} xmc_plan_view;

/* This rank's buffer for one side: element (logical shard index i) of a
 * row-major shard of `shape` lives at ptr + (offset + sum(idx[k]*strides[k])) * elem. */
typedef struct xmc_shard_buffer {
    void *ptr;             /* NULL when this rank holds no shard on this side */
    xmc_mem_kind kind;
    int32_t device;
    uint64_t capacity;     /* elements addressable from ptr */
    int32_t ndim;
    int64_t shape[XMC_MAX_DIMS];
    int64_t offset;
    int64_t strides[XMC_MAX_DIMS];
} xmc_shard_buffer;

/* The group a transfer runs in: ranks are labels taken from the group (never
 * from a default world). The transport is supplied by the caller. */
typedef struct xmc_transport {
    void *ctx;
    /* index-based: peers are positions in `ranks` */
    int (*send)(void *ctx, int32_t peer_index, const void *buf, size_t bytes, uint64_t tag);
    int (*recv)(void *ctx, int32_t peer_index, void *buf, size_t bytes, uint64_t tag);
    /* every member contributes `bytes` and receives all members' contributions
     * in group order into out (size bytes * size); bounded by timeout_ms */
    int (*all_gather)(void *ctx, const void *in, void *out, size_t bytes, uint32_t timeout_ms);
    const char *name;      /* "threads", "gloo", "nccl" */
} xmc_transport;

typedef struct xmc_group {
    int32_t my_index;        /* position of this process in ranks */
    int32_t size;
    const int32_t *ranks;    /* the rank labels, in group order */
    const xmc_transport *transport;
    uint32_t timeout_ms;     /* AFF-NO-HANG bound */
} xmc_group;

/* (0.2) The data path a rank takes to one peer (AFF-PATH). In a request, XMC_PATH_AUTO lets the
 * backend choose per peer from what both ends can do; any other value forces that path to every
 * peer, and a pair that cannot take it is refused by every rank before any write. In a report,
 * XMC_PATH_AUTO marks the rank's own position. */
typedef enum xmc_path {
    XMC_PATH_AUTO = 0,
    XMC_PATH_DIRECT = 1,  /* device copies from the peer's buffer, in one address space */
    XMC_PATH_IPC = 2,     /* device copies from the peer's buffer mapped by IPC, within a node */
    XMC_PATH_NCCL = 3,    /* NCCL send/receive through device staging */
    XMC_PATH_STAGED = 4,  /* the group's transport, through host staging */
    XMC_PATH_COUNT_ = 5
} xmc_path;

/* (0.2) One side of the layout a plan was made for (AFF-LAYOUT): how that rank's shard sits in its
 * buffer, as in xmc_shard_buffer. The executor refuses a buffer whose memory kind, shard shape
 * (and so element count), offset or strides differ from it. */
typedef struct xmc_shard_layout {
    int32_t present;       /* 1: the rank holds a shard on this side (then the buffer must too) */
    xmc_mem_kind kind;
    int32_t ndim;
    int64_t shape[XMC_MAX_DIMS];
    int64_t offset;
    int64_t strides[XMC_MAX_DIMS];
} xmc_shard_layout;

/* (0.2) The layout of one rank of the plan: its source and target and the element size. */
typedef struct xmc_plan_layout {
    int32_t rank;          /* rank label */
    uint64_t elem_size;
    xmc_shard_layout source;
    xmc_shard_layout target;
} xmc_plan_layout;

typedef struct xmc_transfer_args {
    uint32_t struct_size;
    xmc_plan_view plan;
    xmc_shard_buffer source;
    xmc_shard_buffer target;
    size_t elem_size;
    uint64_t staging_budget;  /* bytes per peer direction */
    const xmc_group *group;
    xmc_stream *stream;       /* may be NULL for host buffers */
    /* ---- (0.2) read only when struct_size covers them (XMC_TRANSFER_ARGS_SIZE_V1: without them) */
    xmc_path path;            /* XMC_PATH_AUTO, or the path forced to every peer */
    xmc_path *peer_paths;     /* NULL, or group->size entries: the path taken to each peer position,
                                 written on success and on refusals that got that far (else AUTO) */
    const xmc_plan_layout *layouts;  /* the layouts the plan was made for, one per rank label that
                                        holds a shard; NULL: the plan carries none (no check) */
    size_t layout_count;
} xmc_transfer_args;
/* The size of xmc_transfer_args of ABI version 1 (before the 0.2 members). */
#define XMC_TRANSFER_ARGS_SIZE_V1 offsetof(xmc_transfer_args, path)

typedef struct xmc_transfer_stats {
    uint64_t segments;
    uint64_t chunks;
    uint64_t rounds;
    uint64_t bytes_sent;
    uint64_t bytes_received;
    uint64_t bytes_copied_locally;
    uint64_t staging_peak;    /* largest staging used for one peer direction */
} xmc_transfer_stats;

/* ---- the entry points, listed once ---------------------------------------
 *
 * Every entry point of the table is one line below, X(kind, return type,
 * name, (parameters)), in groups by the capability that brings it; the table
 * (xmc_backend), the in-tree backends' declarations and table filling, and the
 * runner's and backends' checks of the table are all generated from these
 * lists. kind I: takes the instance first and returns an xmc_status (the
 * in-tree backends refuse a NULL, closed or foreign instance with
 * XMC_ERR_INVALID_HANDLE before the call runs); kind P: any other.
 *
 * ABI order: the table's members follow XMC_ENTRY_GROUPS, group by group, so
 * a new entry point goes at the end of the last group, or into a new group
 * appended to XMC_ENTRY_GROUPS (with its capability in XMC_GROUP_CAPABILITY);
 * never into the middle, where it would move the members after it. */

/* (always) an instance and its devices */
#define XMC_ENTRIES_INSTANCE(X)                                                                 \
    /* params may be NULL (defaults); *out is set only on success */                            \
    X(P, xmc_status, open, (const xmc_open_params *params, xmc_instance **out))                 \
    X(I, xmc_status, close, (xmc_instance *inst))                                               \
    X(I, xmc_status, device_count, (xmc_instance *inst, int32_t *count))                        \
    X(I, xmc_status, device_info, (xmc_instance *inst, int32_t index, xmc_device_info *out))

/* (always) errors: last_error copies the calling thread's last error on this
 * instance (all zero, XMC_OK, if none); status_name names any status value */
#define XMC_ENTRIES_ERRORS(X)                                                                   \
    X(P, void, last_error, (xmc_instance *inst, xmc_error_info *out))                           \
    X(P, const char *, status_name, (xmc_status status))

/* pin: page-locked blocks in one process-wide registry */
#define XMC_ENTRIES_PIN(X)                                                                      \
    X(I, xmc_status, pin_alloc,                                                                 \
      (xmc_instance *inst, size_t bytes, size_t alignment, int32_t device, xmc_pin_result *out)) \
    X(I, xmc_status, pin_free, (xmc_instance *inst, void *base))                                \
    X(I, xmc_status, pin_query, (xmc_instance *inst, const void *addr, size_t len, xmc_pin_info *out)) \
    X(I, xmc_status, pin_stats, (xmc_instance *inst, xmc_pin_stats *out))

/* pin_refs: the allocation holds one owner reference, dropped by pin_free;
 * pin_ref/pin_unref take and drop extra references through any interior
 * address. The block is released when no reference is left. */
#define XMC_ENTRIES_PIN_REFS(X)                                                                 \
    X(I, xmc_status, pin_ref, (xmc_instance *inst, const void *addr))                           \
    X(I, xmc_status, pin_unref, (xmc_instance *inst, const void *addr))

/* register: existing host memory made device-accessible at the same address */
#define XMC_ENTRIES_REGISTER(X)                                                                 \
    X(I, xmc_status, reg_register,                                                              \
      (xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags, xmc_reg_info *out)) \
    X(I, xmc_status, reg_unregister, (xmc_instance *inst, void *base))                          \
    X(I, xmc_status, reg_query, (xmc_instance *inst, const void *addr, xmc_reg_info *out))      \
    X(P, xmc_reg_align_policy, reg_align_policy, (xmc_instance *inst))

/* stream: in-order queues with events and host callbacks; device memory */
#define XMC_ENTRIES_STREAM(X)                                                                   \
    X(I, xmc_status, stream_create, (xmc_instance *inst, int32_t device, xmc_stream **out))     \
    X(I, xmc_status, stream_destroy, (xmc_instance *inst, xmc_stream *s))                       \
    X(I, xmc_status, stream_synchronize, (xmc_instance *inst, xmc_stream *s))                   \
    X(I, xmc_status, event_create, (xmc_instance *inst, int32_t device, xmc_event **out))       \
    X(I, xmc_status, event_destroy, (xmc_instance *inst, xmc_event *e))                         \
    X(I, xmc_status, event_record, (xmc_instance *inst, xmc_event *e, xmc_stream *s))           \
    X(I, xmc_status, event_synchronize, (xmc_instance *inst, xmc_event *e))                     \
    X(I, xmc_status, stream_wait_event, (xmc_instance *inst, xmc_stream *s, xmc_event *e))      \
    X(I, xmc_status, host_callback, (xmc_instance *inst, xmc_stream *s, xmc_host_fn fn, void *user)) \
    X(I, xmc_status, dev_alloc, (xmc_instance *inst, int32_t device, size_t bytes, void **out)) \
    X(I, xmc_status, dev_free, (xmc_instance *inst, void *ptr))

/* copy: a 1-, 2- or 3-D strided copy enqueued on a stream */
#define XMC_ENTRIES_COPY(X)                                                                     \
    X(I, xmc_status, copy, (xmc_instance *inst, const xmc_copy_desc *desc, xmc_stream *s))

/* vmm: fixed-address slots. request_launch_copy starts the deferred copy of
 * slot `index` of a remap request on `s`, after the remap itself; a second
 * launch for one slot is XMC_ERR_BUSY. request_stream_wait makes `s` wait
 * for the request's reload copies (VMM-EVENT-WAIT). */
#define XMC_ENTRIES_VMM(X)                                                                      \
    X(I, xmc_status, slot_create,                                                               \
      (xmc_instance *inst, int32_t device, size_t bytes, xmc_slot **out, xmc_slot_info *info))   \
    X(I, xmc_status, slot_release, (xmc_instance *inst, xmc_slot *slot, xmc_stream *s, xmc_request **out)) \
    X(I, xmc_status, slot_remap,                                                                \
      (xmc_instance *inst, xmc_slot *slot, xmc_stream *s, const void *host_src, size_t src_bytes, \
       uint32_t flags, xmc_request **out))                                                      \
    X(I, xmc_status, slot_release_batch,                                                        \
      (xmc_instance *inst, xmc_slot *const *slots, size_t n, xmc_stream *s, xmc_request **out)) \
    X(I, xmc_status, slot_remap_batch,                                                          \
      (xmc_instance *inst, xmc_slot *const *slots, size_t n, xmc_stream *s,                     \
       const void *const *host_srcs, const size_t *src_bytes, uint32_t flags, xmc_request **out)) \
    X(I, xmc_status, request_launch_copy, (xmc_instance *inst, xmc_request *r, uint32_t index, xmc_stream *s)) \
    X(I, xmc_status, request_wait, (xmc_instance *inst, xmc_request *r, uint32_t timeout_ms))   \
    X(I, xmc_status, request_adopt, (xmc_instance *inst, xmc_request *r))                       \
    X(I, xmc_status, request_query, (xmc_instance *inst, xmc_request *r, xmc_request_info *out)) \
    X(I, xmc_status, request_stream_wait, (xmc_instance *inst, xmc_request *r, xmc_stream *s))  \
    X(I, xmc_status, request_destroy, (xmc_instance *inst, xmc_request *r))                     \
    X(I, xmc_status, slot_close, (xmc_instance *inst, xmc_slot *slot))                          \
    X(I, xmc_status, device_free_memory,                                                        \
      (xmc_instance *inst, int32_t device, uint64_t *free_bytes, uint64_t *total_bytes))

/* transfer: execute one rank's part of an affine transfer plan */
#define XMC_ENTRIES_TRANSFER(X)                                                                 \
    X(I, xmc_status, transfer_execute,                                                          \
      (xmc_instance *inst, const xmc_transfer_args *args, xmc_transfer_stats *stats))

/* graph (0.2): stream capture (GRAPH-CAPTURE, VMM-GRAPH, VMM-GRAPH-ORDER).
 * Between graph_begin and graph_end on a stream, its copies and host callbacks
 * are recorded, not run. graph_end gives the recorded work as a graph;
 * graph_launch enqueues all of it, in the order it was recorded, on a stream
 * of the same device, after that stream's prior work and before its later
 * work, as often as asked. A graph reads and writes the addresses it was
 * recorded with: over a slot, each launch sees the slot's backing at that
 * moment (VMM-GRAPH). While a stream captures, every other call naming it
 * (stream_synchronize, stream_destroy, event_record, stream_wait_event,
 * slot_release, slot_remap and their batches, request_launch_copy,
 * request_stream_wait, graph_begin, graph_launch) is refused with
 * XMC_ERR_CAPTURING and changes nothing, the capture included; graph_begin on
 * a stream that a remap's reload copies are still to be enqueued on is
 * XMC_ERR_BUSY. graph_end on a stream that is not capturing is
 * XMC_ERR_INVALID_ARGUMENT. graph_destroy waits for the graph's launches to
 * finish (never frees what a running launch uses). */
#define XMC_ENTRIES_GRAPH(X)                                                                    \
    X(I, xmc_status, graph_begin, (xmc_instance *inst, xmc_stream *s))                          \
    X(I, xmc_status, graph_end, (xmc_instance *inst, xmc_stream *s, xmc_graph **out))           \
    X(I, xmc_status, graph_launch, (xmc_instance *inst, xmc_graph *g, xmc_stream *s))           \
    X(I, xmc_status, graph_destroy, (xmc_instance *inst, xmc_graph *g))

/* (always, 0.2) pin_min_alignment: the alignment every pinned block is
 * guaranteed whatever was asked, the same for every instance (PIN-KINDS;
 * a page for the in-tree backends; may be called with a NULL instance).
 * close_report: close (the same rules), and say what was released; `close`
 * is close_report without the report. A backend whose table ends before
 * these members (struct_size) is taken to guarantee a page, and its
 * PIN-CLOSE and REG-CLOSE are unsupported. */
#define XMC_ENTRIES_ALWAYS_0_2(X)                                                               \
    X(P, size_t, pin_min_alignment, (xmc_instance *inst))                                       \
    X(I, xmc_status, close_report, (xmc_instance *inst, xmc_close_report *out))

/* pin_cache (0.2): pin_free (and the last pin_unref) hands the block to the
 * pool; pin_pool_release unpins and gives back every pooled block, no live
 * one; pin_pool_stats reads the pool (PIN-POOL). */
#define XMC_ENTRIES_PIN_CACHE(X)                                                                \
    X(I, xmc_status, pin_pool_release, (xmc_instance *inst))                                    \
    X(I, xmc_status, pin_pool_stats, (xmc_instance *inst, xmc_pin_pool_stats *out))

/* (0.2) register: the large-registration policy (REG-LARGE), appended after
 * ABI version 1's table; required of every backend declaring `register` */
#define XMC_ENTRIES_REGISTER_LARGE(X)                                                           \
    X(I, xmc_status, reg_large_policy, (xmc_instance *inst, xmc_reg_large_info *out))

/* transfer_prepared (0.3): a transfer prepared once and run many times (AFF-PREPARED-*). All three
 * are collective: every rank of the group calls them, in the same order.
 *
 * transfer_prepare takes what transfer_execute takes and does, once, everything of a transfer but
 * moving the bytes: the checks, the agreement on plan, layouts, element size, budget and paths
 * (AFF-AGREE, AFF-PATH; refusals as transfer_execute's), the staging, and whatever each path opens
 * (IPC handles, a communicator). It copies the plan and layouts; the group, its rank array and its
 * transport must stay valid until transfer_release returns. args->peer_paths, when given, gets the
 * paths as transfer_execute reports them. *out is set only on success.
 *
 * transfer_run moves the sources' bytes as they are when the run's stream reaches it (work queued
 * on `s` before the run completes first; s may be NULL for host buffers), with the statistics and
 * paths transfer_execute would report (peer_paths: NULL or group size entries). Every rank checks
 * that its buffers are still the ones prepared: a buffer the backend saw freed, replaced by a new
 * allocation (also at the same address) or a slot released since prepare makes every rank return
 * XMC_ERR_STALE before any rank writes; a slot remapped since prepare is followed (the run moves
 * its new backing). Ranks that run different prepared transfers, or different runs of one (a rank
 * that skipped a run), all refuse (XMC_ERR_REFUSED) before any write. A handle never prepared,
 * already released, or of another instance is XMC_ERR_INVALID_HANDLE on that rank; its peers fail
 * within the group's timeout (AFF-NO-HANG).
 *
 * transfer_release closes everything prepare opened, also after a failed run; the handle is then
 * dead. transfer_execute behaves as transfer_prepare, one transfer_run and transfer_release. */
#define XMC_ENTRIES_TRANSFER_PREPARED(X)                                                        \
    X(I, xmc_status, transfer_prepare, (xmc_instance *inst, const xmc_transfer_args *args, xmc_prepared **out)) \
    X(I, xmc_status, transfer_run,                                                              \
      (xmc_instance *inst, xmc_prepared *p, xmc_stream *s, xmc_transfer_stats *stats, xmc_path *peer_paths)) \
    X(I, xmc_status, transfer_release, (xmc_instance *inst, xmc_prepared *p))

/* The groups in table order, and the capability whose declaration requires a
 * group's entry points to be filled (0: every backend fills them, up to its
 * struct_size). */
#define XMC_ENTRY_GROUPS(G) G(INSTANCE) G(ERRORS) G(PIN) G(PIN_REFS) G(REGISTER) G(STREAM) G(COPY) G(VMM) G(TRANSFER) \
    G(GRAPH) G(ALWAYS_0_2) G(PIN_CACHE) G(REGISTER_LARGE) G(TRANSFER_PREPARED)
#define XMC_GROUP_CAPABILITY_INSTANCE 0
#define XMC_GROUP_CAPABILITY_ERRORS 0
#define XMC_GROUP_CAPABILITY_PIN XMC_CAP_PIN
#define XMC_GROUP_CAPABILITY_PIN_REFS XMC_CAP_PIN_REFS
#define XMC_GROUP_CAPABILITY_REGISTER XMC_CAP_REGISTER
#define XMC_GROUP_CAPABILITY_STREAM XMC_CAP_STREAM
#define XMC_GROUP_CAPABILITY_COPY XMC_CAP_COPY
#define XMC_GROUP_CAPABILITY_VMM XMC_CAP_VMM
#define XMC_GROUP_CAPABILITY_TRANSFER XMC_CAP_TRANSFER
#define XMC_GROUP_CAPABILITY_GRAPH XMC_CAP_GRAPH
#define XMC_GROUP_CAPABILITY_ALWAYS_0_2 0
#define XMC_GROUP_CAPABILITY_PIN_CACHE XMC_CAP_PIN_CACHE
#define XMC_GROUP_CAPABILITY_REGISTER_LARGE XMC_CAP_REGISTER
#define XMC_GROUP_CAPABILITY_TRANSFER_PREPARED XMC_CAP_TRANSFER_PREPARED

/* ---- the table --------------------------------------------------------- */
#define XMC_TABLE_MEMBER_(kind, ret, name, params) ret (*name) params;
#define XMC_TABLE_GROUP_(group) XMC_ENTRIES_##group(XMC_TABLE_MEMBER_)
typedef struct xmc_backend {
    uint32_t abi_version;   /* XMC_ABI_VERSION */
    uint32_t struct_size;   /* sizeof(xmc_backend) as the backend was built */
    const char *name;
    const char *version;
    xmc_caps capabilities;
    /* one member per entry point, in the order of the lists above */
    XMC_ENTRY_GROUPS(XMC_TABLE_GROUP_)
} xmc_backend;
#undef XMC_TABLE_GROUP_
#undef XMC_TABLE_MEMBER_

typedef const xmc_backend *(*xmc_backend_entry_fn)(uint32_t runner_abi_version);

/* Every backend library defines exactly this symbol. */
XMC_EXPORT const xmc_backend *xmc_backend_entry(uint32_t runner_abi_version);

/* Names of status codes and capabilities, for messages and reports. */
static inline const char *xmc_status_string(xmc_status s) {
    switch (s) {
    case XMC_OK: return "ok";
    case XMC_ERR_INVALID_ARGUMENT: return "invalid_argument";
    case XMC_ERR_NOT_PINNED_BASE: return "not_pinned_base";
    case XMC_ERR_ALREADY_REGISTERED: return "already_registered";
    case XMC_ERR_NOT_REGISTERED: return "not_registered";
    case XMC_ERR_NON_IDENTITY: return "non_identity_mapping";
    case XMC_ERR_MEMLOCK: return "memlock_limit";
    case XMC_ERR_UNSUPPORTED: return "unsupported";
    case XMC_ERR_BUSY: return "busy";
    case XMC_ERR_DUPLICATE_IN_BATCH: return "duplicate_in_batch";
    case XMC_ERR_DRIVER: return "driver_error";
    case XMC_ERR_OUT_OF_MEMORY: return "out_of_memory";
    case XMC_ERR_INVALID_HANDLE: return "invalid_handle";
    case XMC_ERR_TIMEOUT: return "timeout";
    case XMC_ERR_REFUSED: return "refused";
    case XMC_ERR_PEER_FAILED: return "peer_failed";
    case XMC_ERR_NO_DEVICE: return "no_device";
    case XMC_ERR_TOO_LARGE: return "too_large";
    case XMC_ERR_CAPTURING: return "capturing";
    case XMC_ERR_STALE: return "stale";
    default: return "unknown_status";
    }
}

static inline const char *xmc_cap_string(xmc_caps single_cap) {
    switch (single_cap) {
    case XMC_CAP_PIN: return "pin";
    case XMC_CAP_PIN_REFS: return "pin_refs";
    case XMC_CAP_PIN_REGISTER: return "pin_register";
    case XMC_CAP_REGISTER: return "register";
    case XMC_CAP_STREAM: return "stream";
    case XMC_CAP_COPY: return "copy";
    case XMC_CAP_VMM: return "vmm";
    case XMC_CAP_TRANSFER: return "transfer";
    case XMC_CAP_GRAPH: return "graph";
    case XMC_CAP_REGISTER_PORTABLE: return "register_portable";
    case XMC_CAP_PIN_DRIVER: return "pin_driver";
    case XMC_CAP_PIN_CACHE: return "pin_cache";
    case XMC_CAP_TRANSFER_PREPARED: return "transfer_prepared";
    default: return "unknown_capability";
    }
}

#ifdef __cplusplus
}
#endif
#endif /* XMC_BACKEND_H */
