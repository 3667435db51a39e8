/* Control API of the fake CUDA driver (libxmc_fake_cuda.so).
 *
 * The fake stands in for libcuda.so.1: a program (the xmc CUDA backend) that
 * dlopens the library named by XMC_CUDA_DRIVER and resolves the driver's
 * versioned entry points (cuMemAlloc_v2, cuMemHostRegister_v2, ...) gets host
 * memory standing in for device memory, several devices with UUIDs, streams
 * that run on worker threads, and the real driver's answers on misuse (as
 * recorded by hardware/probe on an H200 with driver 580). The functions below
 * are extra exports for tests: resolve them with dlsym (a program linked to a
 * real driver will not find them) or link the library directly.
 *
 * ---- configuration (environment, read when the library loads and at reset)
 *   XMC_FAKE_CUDA_DEVICES   number of devices, 0..16 (default 2); with 0,
 *                           cuInit answers CUDA_ERROR_NO_DEVICE
 *   XMC_FAKE_CUDA_ORDER     enumeration order as physical indices, e.g. "1,0":
 *                           ordinal i is physical device ORDER[i]. UUID, name
 *                           and PCI bus id follow the physical device, so a
 *                           backend matching by ordinal instead of UUID is caught
 *   XMC_FAKE_CUDA_MEM_BYTES device memory per device (default 1G); a number with
 *                           optional K/M/G suffix, or a comma list per physical
 *                           device ("1G,512M")
 *   XMC_FAKE_CUDA_STREAM_POOL_BYTES  bytes a context's device keeps for good
 *                           each time its live streams reach a new high (default
 *                           0: none), as the H200 driver keeps 2 MiB per stream
 *   XMC_FAKE_CUDA_ATTRS     device attribute overrides, comma-separated
 *                           [pN:]ATTR=VALUE, ATTR a CUdevice_attribute number or
 *                           one of host_register_supported,
 *                           virtual_memory_management_supported,
 *                           unified_addressing, can_map_host_memory,
 *                           read_only_host_register_supported; pN: limits it to
 *                           physical device N. host_register_supported=0 makes
 *                           cuMemHostRegister answer CUDA_ERROR_NOT_SUPPORTED,
 *                           virtual_memory_management_supported=0 does the same
 *                           for cuMemCreate and cuMemGetAllocationGranularity
 *   XMC_FAKE_CUDA_FAULTS    a fault script (below)
 *   XMC_FAKE_CUDA_TRACE     if set and not "0", every driver call is printed to stderr
 * A malformed setting is reported on stderr when the library loads, and
 * cuInit then answers CUDA_ERROR_INVALID_VALUE (so nothing runs half-configured);
 * xmc_fake_cuda_last_error() returns the message.
 *
 * ---- fault scripts (XMC_FAKE_CUDA_FAULTS, xmc_fake_cuda_set_faults)
 *   The grammar both fakes share is in fakes/README.md. What is particular to
 *   this fake:
 *   - ENTRY is any entry point it exports, with or without the version
 *     suffix; CODE a CUresult name or a number 1..1023.
 *   - nonidentity:cuMemHostRegister:OFFSET (OFFSET non-zero, below 2^40,
 *     decimal or 0x hex): the registration's device address becomes
 *     host + OFFSET (cuMemHostGetDevicePointer and
 *     CU_POINTER_ATTRIBUTE_DEVICE_POINTER report it, and copies through it
 *     reach the host memory).
 *   - size_limit sees the byte count of cuMemAlloc, cuMemHostRegister,
 *     cuMemAddressReserve, cuMemCreate, cuMemMap and of the one-dimensional
 *     copies and sets (cuMemcpy[HtoD|DtoH|DtoD|Peer]Async, cuMemsetD8Async and
 *     their synchronous forms cuMemcpy, cuMemcpyHtoD, cuMemcpyDtoH,
 *     cuMemcpyDtoD, cuMemsetD8).
 *   - exhaust counts, per entry: cuMemHostRegister registrations,
 *     cuMemAlloc allocations, cuMemAddressReserve reservations, cuMemCreate
 *     handles not yet released (a released handle still mapped is gone for
 *     the program), cuMemMap mappings, cuStreamCreate streams, cuEventCreate
 *     events, cuDevicePrimaryCtxRetain outstanding retains, cuCtxCreate
 *     created contexts, cuIpcOpenMemHandle mappings of other processes'
 *     memory not closed yet, cuMemImportFromShareableHandle handles (with
 *     cuMemCreate's): the objects the ledger lists.
 *   - exec_delay applies to the asynchronous copies and sets (cuMemcpy*Async,
 *     cuMemcpy3DPeerAsync, cuMemsetD8Async): the copy waits on its stream,
 *     holding back what is queued after it.
 *   - A call refused because it was made on a host-callback thread is not
 *     counted by rules.
 *
 * ---- behaviour worth knowing (details in the sources)
 *   - Every driver call made on a thread that is running a host function
 *     (cuLaunchHostFunc) answers CUDA_ERROR_NOT_PERMITTED, except the pure
 *     lookups cuGetErrorName/cuGetErrorString. (The real driver refuses most
 *     such calls but, as recorded, lets cuEventRecord and cuStreamQuery of
 *     another stream through; the fake is stricter on purpose: VMM-CALLBACK.)
 *   - Registration tracking is process-wide and by exact byte range (as on
 *     the real driver): any overlap is CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
 *     unregister of an interior address is CUDA_ERROR_INVALID_VALUE, of any
 *     other unregistered address CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED.
 *   - A copy whose device side is not (or no longer) mapped when it runs sets
 *     the context's sticky error CUDA_ERROR_ILLEGAL_ADDRESS (like a GPU fault);
 *     later calls in that context return it until the context is destroyed.
 *   - The legacy default stream (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) is
 *     one ordinary in-order stream per context: it does not synchronise with
 *     other streams.
 *   - In a child forked after cuInit every driver call answers
 *     CUDA_ERROR_NOT_INITIALIZED (the child has no stream workers), and the
 *     child's exit does not wait for the parent's workers.
 *   - Streams hold their ops until run; cuStreamDestroy returns at once and
 *     the queued work still runs. Copies run under the fake's one mutex.
 *   - Host functions of ALL streams run on one process-wide callback thread,
 *     one at a time, in the order their streams reach them (as recorded on
 *     the real driver): a host function that blocks holds every other
 *     stream's host functions, though not their copies, records and waits.
 *   - cuStreamWaitValue32 / cuStreamWriteValue32 (the _v2 symbols) take a
 *     device address: device memory, a VMM mapping, or registered host memory
 *     through cuMemHostGetDevicePointer; plain host memory is
 *     CUDA_ERROR_INVALID_VALUE. A wait re-reads the word every 50 us, so a
 *     plain host store to registered memory releases it.
 */
#ifndef XMC_FAKE_CUDA_CONTROL_H
#define XMC_FAKE_CUDA_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define XMC_FAKE_CUDA_EXPORT __attribute__((visibility("default")))
#else
#define XMC_FAKE_CUDA_EXPORT
#endif

/* Installs a fault script, replacing the previous one (NULL or "" clears all
 * rules). Returns 0, or -1 when the script is malformed: then nothing changes
 * and xmc_fake_cuda_last_error() says which rule is wrong and why. */
XMC_FAKE_CUDA_EXPORT int xmc_fake_cuda_set_faults(const char* script);

/* Copies the last configuration or fault-script error message (empty if none)
 * into buf (always NUL-terminated when n > 0); returns its full length. */
XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_last_error(char* buf, size_t n);

/* Describes every live object (retained contexts, streams, events, device
 * allocations, registrations, reservations, physical handles, mappings), one
 * per line, into buf (NUL-terminated, truncated to n); returns the full length
 * (so xmc_fake_cuda_ledger(NULL, 0) + 1 is the size to allocate). */
XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_ledger(char* buf, size_t n);

/* The number of live objects the ledger lists (a primary context counts once
 * per outstanding retain). 0 means the program cleaned up everything. */
XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_live_objects(void);

/* Objects that a context's destruction freed implicitly (registrations,
 * allocations, streams, events the program had not released itself) since
 * load or reset. The real driver frees them too, but a clean program does not
 * rely on it, so a leak check looks at this as well. */
XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_reclaimed_objects(void);

/* VMM-DOUBLE: how many second unmaps of one mapping (cuMemUnmap of a range
 * whose mapping was unmapped before and nothing mapped there since) and second
 * releases of one physical handle (cuMemRelease of a released handle) the
 * driver saw since load or reset. A clean program makes none. */
XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_second_releases(void);

/* How many times an entry point was called since load or reset; the name may
 * carry its version suffix or not. NULL gives the total over all entries. */
XMC_FAKE_CUDA_EXPORT uint64_t xmc_fake_cuda_call_count(const char* entry);

/* The calling thread of every driver call (SPEC 6: a requirement about which
 * thread calls the driver is observed at the driver). Every entry point, refused
 * or not, appends one record: its base name, the caller's thread id (gettid),
 * whether the call was made inside a host function (cuLaunchHostFunc), and
 * whether the calling thread is the fake's host-callback thread. At most
 * XMC_FAKE_CUDA_CALL_RECORDS records are kept after a reset of the records;
 * later calls are counted, not kept. */
#define XMC_FAKE_CUDA_CALL_RECORDS 65536
typedef struct xmc_fake_cuda_call_record {
    char entry[48];              /* base name, e.g. "cuMemUnmap" */
    int64_t tid;                 /* gettid() of the calling thread */
    uint8_t in_host_callback;    /* made inside a host function */
    uint8_t on_callback_thread;  /* made on the fake's host-callback thread */
} xmc_fake_cuda_call_record;

/* Copies up to n of the records kept since the last xmc_fake_cuda_reset_call_records
 * (oldest first) into out (which may be NULL when n is 0); returns how many calls
 * were made since then, kept or not (more than XMC_FAKE_CUDA_CALL_RECORDS: some
 * were not kept). */
XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_call_records(xmc_fake_cuda_call_record* out, size_t n);

/* Forgets the records; recording goes on from an empty list. */
XMC_FAKE_CUDA_EXPORT void xmc_fake_cuda_reset_call_records(void);

/* Test only: stops every stream worker (work still queued is dropped; a host
 * function already running is waited for), frees every object, clears the
 * fault script and the counters, re-reads the environment, and returns the
 * driver to "cuInit not called". Handles issued before stay invalid. Must not
 * be called from a host function or while other threads use the driver. */
XMC_FAKE_CUDA_EXPORT void xmc_fake_cuda_reset(void);

/* For the other fakes (the fake NCCL, which finds it with dlsym): queues fn(user) on
 * a stream (0: the current context's default stream). It runs in stream order on the
 * stream's worker thread (not the host-callback thread), and the stream goes on only
 * once it returns, as a kernel that occupies the stream. CUDA_SUCCESS, or the stream's
 * error (CUDA_ERROR_INVALID_HANDLE, the sticky error, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
 * for a capturing stream). fn must not call the driver. */
typedef struct CUstream_st* xmc_fake_cuda_stream_t;
XMC_FAKE_CUDA_EXPORT int xmc_fake_cuda_stream_enqueue(xmc_fake_cuda_stream_t stream, void (*fn)(void*), void* user);

#ifdef __cplusplus
}
#endif

#endif
