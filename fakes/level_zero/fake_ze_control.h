/* Control API of the fake Level Zero driver (libxmc_fake_ze.so).
 *
 * The fake is a Level Zero *driver*: the real loader (libze_loader.so.1) loads it when
 * ZE_ENABLE_ALT_DRIVERS=/path/to/libxmc_fake_ze.so, and the program reaches it through
 * the ordinary ze* calls. The functions below are exported by the fake itself; a test
 * reaches them by dlopen()ing the same path (the loader's dlopen of that path returns
 * the same handle, so the state is shared) or by linking the library.
 *
 * ---------------------------------------------------------------------------------
 * Environment (read once, at the driver's first init)
 *   XMC_FAKE_ZE_DEVICES        number of devices, 0..16 (default 2); with 0 the driver
 *                              initialises and zeDeviceGet lists no device
 *   XMC_FAKE_ZE_ORDER          order in which zeDeviceGet returns them, a permutation of
 *                              the native indices, e.g. "1,0"; each device keeps its UUID,
 *                              name and memory (UUIDs follow the device)
 *   XMC_FAKE_ZE_DEVICE_MEMORY  memory per device in bytes, optional K/M/G suffix
 *                              (default 8G); device allocations and physical memory are
 *                              counted against it
 *   XMC_FAKE_ZE_FAULTS         initial fault script (below)
 * A malformed value prints a message naming the variable to stderr and makes the
 * driver's init fail with ZE_RESULT_ERROR_INVALID_ARGUMENT, so the loader reports no
 * fake devices instead of silently running a different configuration.
 *
 * Device i (native index) has UUID bytes "xmcfakeze" 00 00 00 00 00 00 i, and the name
 * "xmc fake Level Zero device i".
 *
 * ---------------------------------------------------------------------------------
 * Fault scripts (XMC_FAKE_ZE_FAULTS and xmc_fake_ze_set_faults). The grammar both fakes
 * share is in fakes/README.md. What is particular to this fake:
 *   - ENTRY is an entry point the fake implements (fake_ze_entries.h, e.g. zeMemFree,
 *     zeMemAllocHost, zeCommandListAppendMemoryCopy, zesMemoryGetState); CODE a
 *     ze_result_t name or a number 1..0x7fffffff.
 *   - nonidentity:zeMemAllocHost (no argument): an external-memmap registration
 *     succeeds but returns an address other than pSystemMemory (a private alias, not
 *     coherent with the original pages); zeMemFree of that address releases it.
 *   - size_limit sees the size argument of zeMemAllocHost (plain and registrations),
 *     zeMemAllocDevice, zeVirtualMemReserve, zeVirtualMemMap,
 *     zeCommandListAppendMemoryCopy, and desc->size of zePhysicalMemCreate.
 *   - exhaust counts, per entry: zeMemAllocHost host allocations and registrations,
 *     zeMemAllocDevice device allocations, zeVirtualMemReserve reservations,
 *     zePhysicalMemCreate physical memory objects, zeVirtualMemMap mappings,
 *     zeCommandQueueCreate queues, zeCommandListCreate regular lists,
 *     zeCommandListCreateImmediate immediate lists, zeEventPoolCreate pools,
 *     zeEventCreate events, and zeContextCreate / zeContextCreateEx every context:
 *     the objects the ledger lists.
 *   - exec_delay applies to zeCommandListAppend*: the appended command waits on the
 *     device before it runs; the append returns at once.
 *   - On a malformed script xmc_fake_ze_set_faults also prints the reason to stderr.
 *
 * ---------------------------------------------------------------------------------
 * What the fake models, and its answers where the specification leaves a choice
 *   zeMemAllocHost + external-memmap descriptor (ze_external_memmap.h): registers the
 *     range and returns the same address; the range is mapped ONLY for the context's
 *     device that zeDeviceGet lists first (the Intel behaviour that broke real code), so
 *     a copy that touches it on any other device fails when appended with
 *     ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY; a zeContextCreateEx context of one device
 *     maps it for that device. Refusals: null pSystemMemory INVALID_NULL_POINTER;
 *     size 0 or not a multiple of 4096 UNSUPPORTED_SIZE; pSystemMemory not
 *     4096-aligned UNSUPPORTED_ALIGNMENT; size argument != descriptor size
 *     INVALID_ARGUMENT; overlap with a registration or any allocation or reservation
 *     of the fake, or pages not mapped in the process, OUT_OF_HOST_MEMORY (the code
 *     compute-runtime returns when this path fails).
 *   zeMemFree: exactly a base the fake returned, in the context that created it, else
 *     INVALID_ARGUMENT; for a registration it never frees the caller's pages.
 *   zeContextDestroy with objects of the context alive: HANDLE_OBJECT_IN_USE.
 *   zeMemAllocDevice / zePhysicalMemCreate for a device outside the context:
 *     DEVICE_LOST (as compute-runtime); beyond the device's free memory:
 *     OUT_OF_DEVICE_MEMORY.
 *   Virtual memory: page size 2 MiB; addresses and sizes must be multiples
 *     (UNSUPPORTED_ALIGNMENT / UNSUPPORTED_SIZE); the reservation hint is ignored (the
 *     validation layer refuses a null one); mapping an already mapped page or unmapping
 *     an unmapped one: INVALID_ARGUMENT; zePhysicalMemDestroy or zeVirtualMemFree
 *     while mapped: HANDLE_OBJECT_IN_USE. Unmapped pages are PROT_NONE: touching them
 *     faults. Free device memory: zesDeviceEnumMemoryModules + zesMemoryGetState, or
 *     xmc_fake_ze_device_free_memory.
 *   Command lists and queues are in order, one worker thread each; events order work
 *     across them. Fences and everything not listed in fake_ze_entries.h are left null
 *     in the driver's tables: through the loader they answer
 *     ZE_RESULT_ERROR_UNSUPPORTED_FEATURE (ZE_RESULT_ERROR_UNINITIALIZED when the
 *     loader intercepts, e.g. ZE_ENABLE_LOADER_INTERCEPT=1).
 *
 * ---------------------------------------------------------------------------------
 * Device faults. A copy is checked twice: when appended (a registered range not mapped
 * for the list's device fails the append with ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
 * ranges that run past an allocation give ZE_RESULT_ERROR_INVALID_ARGUMENT) and when it
 * executes: if an allocation it uses was freed in between, a virtual range it uses is
 * not mapped with the needed access, or pageable memory it uses is no longer mapped in
 * the process, the copy is skipped and counted as a device fault
 * (xmc_fake_ze_device_faults, listed in the ledger). Its signal event is still
 * signalled, so that no device-side waiter hangs, but zeEventHostSynchronize and
 * zeEventQueryStatus answer ZE_RESULT_ERROR_DEVICE_LOST for it (until it is reset);
 * the immediate list refuses further appends, and the command queue answers
 * zeCommandQueueSynchronize, with ZE_RESULT_ERROR_DEVICE_LOST from then on.
 *
 * Note: the Debian loader (spec 1.4) has no zeCommandListHostSynchronize; wait for an
 * immediate list by appending a signal event and calling zeEventHostSynchronize.
 */
#ifndef XMC_FAKES_LEVEL_ZERO_FAKE_ZE_CONTROL_H
#define XMC_FAKES_LEVEL_ZERO_FAKE_ZE_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Installs a fault script (fakes/README.md), replacing the current rules and restarting
 * their counters. NULL or "" clears them. Returns 0, or -1 for a malformed script. */
int xmc_fake_ze_set_faults(const char* script);

/* Why the last script was rejected; "" when the last one was accepted. The text stays
 * valid until the next call. */
const char* xmc_fake_ze_fault_error(void);

/* Number of live objects: contexts, host and device allocations, registrations,
 * command queues, command lists, event pools, events, virtual reservations, physical
 * memory objects and virtual mappings. The driver and its devices are not counted. */
size_t xmc_fake_ze_live_objects(void);

/* Writes a human-readable list of the live objects (one per line, then counters and
 * the recent device-fault messages) into buf, NUL-terminated and truncated to cap
 * bytes. Returns the full length of the text, excluding the NUL (as snprintf). */
size_t xmc_fake_ze_ledger(char* buf, size_t cap);

/* Releases every live object (workers joined, mappings removed, memfds closed; host
 * memory that the caller registered is never freed), clears the fault rules, the call
 * counters and the device-fault counter. Devices and the init state stay. Handles
 * released this way answer ZE_RESULT_ERROR_INVALID_ARGUMENT if used again. */
void xmc_fake_ze_reset(void);

/* Calls made to one entry point (e.g. "zeMemFree") since the last reset, including
 * calls failed by the fault script; NULL gives the total over all entry points. */
uint64_t xmc_fake_ze_call_count(const char* entry);

/* VMM-DOUBLE: second unmaps of one mapping (zeVirtualMemUnmap at an address unmapped
 * before and not mapped since) and second destroys of one physical memory object
 * since the last reset. A clean program makes none. */
size_t xmc_fake_ze_second_releases(void);

/* Copies skipped at execution time because they touched freed or unmapped memory. */
uint64_t xmc_fake_ze_device_faults(void);

/* Why the environment was refused at the driver's first init ("" when it was accepted
 * or has not been read yet): a test that configured the fake checks its configuration
 * took effect. The text stays valid until the next call. */
const char* xmc_fake_ze_config_error(void);

/* The calling thread of every entry point (SPEC 6: a requirement about which thread
 * calls the driver is observed at the driver). Every call, failed by a fault rule or
 * not, appends one record: its name and the caller's thread id (gettid). Level Zero
 * has no host callbacks, so the fake cannot tell a callback thread from another; a test
 * learns a stream's callback thread from a callback of its own. At most
 * XMC_FAKE_ZE_CALL_RECORDS records are kept after a reset of the records; later calls
 * are counted, not kept. */
#define XMC_FAKE_ZE_CALL_RECORDS 65536
typedef struct xmc_fake_ze_call_record {
    char entry[48];  /* e.g. "zeVirtualMemUnmap" */
    int64_t tid;     /* gettid() of the calling thread */
} xmc_fake_ze_call_record;

/* Copies up to n of the records kept since the last xmc_fake_ze_reset_call_records
 * (oldest first) into out (NULL when n is 0); returns how many calls were made since
 * then, kept or not. */
size_t xmc_fake_ze_call_records(xmc_fake_ze_call_record* out, size_t n);

/* Forgets the records; recording goes on from an empty list. */
void xmc_fake_ze_reset_call_records(void);

/* Free memory of the device with this native index (its position when
 * XMC_FAKE_ZE_ORDER is unset), as zesMemoryGetState reports it; -1 when there is no
 * such device or the driver is not initialised. */
int64_t xmc_fake_ze_device_free_memory(uint32_t native_index);

#ifdef __cplusplus
}
#endif

#endif /* XMC_FAKES_LEVEL_ZERO_FAKE_ZE_CONTROL_H */
