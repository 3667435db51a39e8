// Internal state of the fake Level Zero driver: object tables, the global lock, fault
// rules, and the helpers the entry-point files share. Not installed, not for users.
//
// Locking: one mutex (State::mu) guards everything, and one condition variable
// (State::cv) is notified on every change that anybody may wait for (event signalled,
// work queued or finished). Entry points take the lock for their whole body, except
// for injected delays, which sleep unlocked. Device work runs on one worker thread per
// immediate command list or command queue, and takes the same lock while it copies, so
// a copy never races with a free or an unmap.
#pragma once

#include <level_zero/ze_api.h>
#include <level_zero/zes_api.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fake_ze_control.h"
#include "fault_script.hpp"

namespace xmc_fake_ze {

constexpr size_t kHostPage = 4096;
constexpr size_t kVmmPage = size_t(2) << 20;  // zeVirtualMemQueryPageSize
constexpr uint32_t kMaxDevices = 16;

// ---------------------------------------------------------------------------------
// Handles. A handle is an opaque number (kind << 40 | id << 4), never an address, so a
// destroyed handle can never come back as a different live object. Nobody dereferences
// driver handles: the loader and its validation layer only store and forward them.
enum class Kind : uint64_t {
    Driver = 1, Device, Context, Queue, List, EventPool, Event, PhysMem, SysmanMem
};

template <class H>
H make_handle(Kind k, uint64_t id) {
    return reinterpret_cast<H>(static_cast<uintptr_t>((uint64_t(k) << 40) | (id << 4)));
}
// The id inside a handle of kind k, or 0 when h is not such a handle.
uint64_t handle_id(const void* h, Kind k);

// ---------------------------------------------------------------------------------
// Objects.
struct Device {
    uint32_t native = 0;   // index in creation order; selects UUID and name
    uint32_t position = 0; // index in zeDeviceGet order (XMC_FAKE_ZE_ORDER)
    uint64_t total = 0;    // bytes of device memory
    uint64_t used = 0;     // device allocations + physical memory
};

struct Context {
    uint64_t id = 0;
    std::vector<uint32_t> devices;  // native indices, in the order given
    // The device for which external-memmap registrations in this context are mapped:
    // the context's device that comes first in zeDeviceGet order (Intel's runtime maps
    // for the first entry of its per-context device map only).
    uint32_t first = 0;
};

enum class AllocType { Host, Device, Registration };

struct Alloc {
    uint64_t id = 0;
    AllocType type = AllocType::Host;
    uintptr_t base = 0;              // what zeMemAllocHost/zeMemAllocDevice returned
    size_t size = 0;
    uint64_t ctx = 0;
    uint32_t device = 0;             // Device: owning device (native)
    std::vector<uint32_t> mapped_for;  // Registration: devices that can use it
    void* block = nullptr;           // memory the fake owns (host/device block, alias)
    size_t block_size = 0;
    uintptr_t system_memory = 0;     // Registration: pSystemMemory
};

struct Page {  // one 2 MiB page of a virtual reservation
    uint64_t phys = 0;      // physical memory object mapped here, 0 = unmapped
    uint64_t offset = 0;    // offset into it
    uint64_t mapping = 0;   // zeVirtualMemMap call that mapped it
    ze_memory_access_attribute_t access = ZE_MEMORY_ACCESS_ATTRIBUTE_NONE;
};

struct Reservation {
    uintptr_t base = 0;
    size_t size = 0;
    uint64_t ctx = 0;
    std::vector<Page> pages;
};

struct PhysMem {
    uint64_t id = 0;
    uint64_t ctx = 0;
    uint32_t device = 0;
    size_t size = 0;
    int fd = -1;
    uint64_t mapped_pages = 0;
};

struct Mapping {  // one zeVirtualMemMap call, live while any of its pages is mapped
    uint64_t id = 0;
    uintptr_t base = 0;
    size_t size = 0;
    uint64_t phys = 0;
    size_t pages_left = 0;
};

// What a copy's source or destination range turned out to be when it was appended;
// checked again when the copy runs.
struct RangeRef {
    enum What { Pageable, Alloc, Virtual } what = Pageable;
    uintptr_t ptr = 0;
    size_t bytes = 0;
    uintptr_t alloc_base = 0;
    uint64_t alloc_id = 0;
    bool write = false;
};

struct CopyOp {
    uintptr_t dst = 0, src = 0;      // first byte of the region (origins applied)
    size_t width = 0, height = 1, depth = 1;
    size_t dst_pitch = 0, dst_slice = 0, src_pitch = 0, src_slice = 0;
    RangeRef dst_ref, src_ref;
};

struct Task {
    uint64_t seq = 0;
    std::string what;                // entry point that appended it
    bool has_copy = false;
    CopyOp copy;
    std::vector<uint64_t> waits;     // event ids
    uint64_t signal = 0;             // event id, 0 = none
    uint64_t exec_delay_us = 0;      // an exec_delay fault holds the task back this long
};

// An in-order device queue with its own worker thread (immediate lists and command
// queues each own one).
struct Engine {
    std::string name;
    uint32_t device = 0;
    bool synchronous = false;        // ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS
    std::deque<Task> pending;
    bool busy = false;
    bool stop = false;   // destroy: finish runnable work, give up on blocked waits
    bool abort = false;  // reset: drop all work now
    uint64_t submitted = 0, done = 0;
    ze_result_t sticky = ZE_RESULT_SUCCESS;  // DEVICE_LOST after a device fault
    uint64_t dropped = 0;
    std::thread thread;
};

struct CmdList {
    uint64_t id = 0;
    uint64_t ctx = 0;
    uint32_t device = 0;
    bool immediate = false;
    bool closed = false;
    std::vector<Task> recorded;       // regular lists
    std::unique_ptr<Engine> engine;   // immediate lists
};

struct Queue {
    uint64_t id = 0;
    uint64_t ctx = 0;
    uint32_t device = 0;
    std::unique_ptr<Engine> engine;
};

struct EventPool {
    uint64_t id = 0;
    uint64_t ctx = 0;
    uint32_t count = 0;
    std::vector<uint64_t> slots;  // event id per index, 0 = free
};

struct Event {
    uint64_t id = 0;
    uint64_t pool = 0;
    uint32_t index = 0;
    bool signaled = false;
    bool faulted = false;  // signalled by work that hit a device fault
};

// ---------------------------------------------------------------------------------
// Fault script: the fake's dialect (entry points, result codes) of the shared grammar
// (fakes/README.md), and what the rules decided for one call.
const xmc_faults::Dialect& fault_dialect();

struct FaultOutcome {
    ze_result_t result = ZE_RESULT_SUCCESS;
    bool nonidentity = false;
    uint64_t exec_delay_us = 0;
};

// ---------------------------------------------------------------------------------
struct State {
    std::mutex mu;
    std::condition_variable cv;

    bool configured = false;          // environment read
    ze_result_t config_result = ZE_RESULT_SUCCESS;
    bool initialized = false;         // zeInit succeeded at least once
    std::vector<Device> devices;      // by native index
    std::vector<uint32_t> order;      // position -> native index

    uint64_t next_id = 1;
    std::map<uint64_t, Context> contexts;
    std::map<uintptr_t, Alloc> allocs;             // by base
    std::map<uintptr_t, Reservation> reservations; // by base
    std::map<uint64_t, PhysMem> physmems;
    std::map<uint64_t, Mapping> mappings;
    // VMM-DOUBLE's ledger: each unmap of a mapping and each destroy of a physical memory object
    // is recorded once; a second one (refused ZE_RESULT_ERROR_INVALID_ARGUMENT) is counted.
    std::set<uintptr_t> unmapped;   // addresses unmapped since last mapped
    std::set<uint64_t> destroyed;   // physical memory ids destroyed
    size_t second_releases = 0;
    std::map<uint64_t, std::unique_ptr<CmdList>> lists;
    std::map<uint64_t, std::unique_ptr<Queue>> queues;
    std::map<uint64_t, EventPool> pools;
    std::map<uint64_t, Event> events;

    std::vector<xmc_faults::Rule> rules;
    std::string fault_error;
    std::map<std::string, uint64_t> calls;
    // The calling thread of each call since the records' reset (at most
    // XMC_FAKE_ZE_CALL_RECORDS kept; call_records_seen counts them all).
    std::vector<xmc_fake_ze_call_record> call_records;
    size_t call_records_seen = 0;
    std::string config_error;  // why configure_locked refused the environment
    uint64_t device_faults = 0;
    std::deque<std::string> fault_log;  // most recent device-fault messages
};

// The one instance (never destroyed, so that exit never joins worker threads).
State& S();

// Reads the environment once (lock held). Sets S().config_result.
void configure_locked();

// Entry-point prologue: counts the call, applies the fault rules (sleeping unlocked for
// delays). Call it first, without the lock. `size` (null: none) is the call's size
// argument, for size_limit rules: the entries kEntries marks as taking one pass it.
FaultOutcome enter(const char* entry, const uint64_t* size = nullptr);
inline FaultOutcome enter_sized(const char* entry, uint64_t size) { return enter(entry, &size); }

// Name of a result code ("ZE_RESULT_ERROR_DEVICE_LOST"), or "" if unknown.
const char* result_name(ze_result_t r);

// Lookups (lock held); null when h is not a live object of that kind.
Device* device_of(ze_device_handle_t h);
Context* context_of(ze_context_handle_t h);
ze_device_handle_t device_handle(uint32_t native);
bool context_has(const Context& c, uint32_t native);
// A handle that names no live object: NULL is ZE_RESULT_ERROR_INVALID_NULL_HANDLE, any other
// ZE_RESULT_ERROR_INVALID_ARGUMENT.
inline ze_result_t bad_handle(const void* h) {
    return h == nullptr ? ZE_RESULT_ERROR_INVALID_NULL_HANDLE : ZE_RESULT_ERROR_INVALID_ARGUMENT;
}
// The context and device a create call names (lock held), both live; else the error to return.
struct ContextDevice {
    ze_result_t result = ZE_RESULT_SUCCESS;
    Context* c = nullptr;
    Device* d = nullptr;
};
inline ContextDevice context_and_device(ze_context_handle_t hContext, ze_device_handle_t hDevice) {
    Context* c = context_of(hContext);
    if (c == nullptr) return {bad_handle(hContext)};
    Device* d = device_of(hDevice);
    if (d == nullptr) return {ZE_RESULT_ERROR_INVALID_NULL_HANDLE};
    return {ZE_RESULT_SUCCESS, c, d};
}

// Memory classification for copies (lock held). check_range is the append-time check:
// ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY for a registration not mapped for `device`,
// ZE_RESULT_ERROR_INVALID_ARGUMENT for a range that leaves an allocation or a
// reservation. recheck_range is the execution-time check; false (with a reason) when
// the memory was freed or is not mapped with the needed access.
ze_result_t check_range(uintptr_t p, size_t n, uint32_t device, bool write, RangeRef& out);
bool recheck_range(const RangeRef& r, std::string& why);

// Records a device fault (lock held).
void note_device_fault(const std::string& message);

// Used by xmc_fake_ze_reset (lock held). stop_engines_locked tells every worker to
// drop its work and returns the threads, which the caller joins after unlocking; then
// release_commands_locked frees lists, queues, pools and events, and
// release_memory_locked frees memory objects and contexts.
void stop_engines_locked(std::vector<std::thread>& threads);
void release_commands_locked();
void release_memory_locked();

// Ledger lines for the command objects (lock held).
void ledger_commands_locked(std::string& out);
size_t count_command_objects_locked();

}  // namespace xmc_fake_ze
