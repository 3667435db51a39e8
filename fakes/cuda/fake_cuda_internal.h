// Internal state of the fake CUDA driver. One process-wide State, guarded by
// one mutex (State::mu) and one condition variable (State::cv, notified on
// every change a waiter may care about). Nothing holds the mutex while a host
// function (cuLaunchHostFunc) runs or while a delay fault sleeps.
//
// Handles (CUcontext, CUstream, CUevent, CUmemGenericAllocationHandle) are
// numbers from one counter, never reused and never dereferenced: a stale or
// foreign handle is simply not found. Device pointers are real host addresses
// (device memory is host memory), so memcpy moves the data.
#ifndef XMC_FAKE_CUDA_INTERNAL_H
#define XMC_FAKE_CUDA_INTERNAL_H

// The driver's entry points are declared by cuda.h; giving those declarations
// default visibility exports their definitions from this library, which is
// otherwise built with hidden visibility.
#pragma GCC visibility push(default)
#include <cuda.h>
#pragma GCC visibility pop

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fake_cuda_control.h"
#include "fault_script.hpp"

#define XMC_FAKE_EXPORT extern "C" __attribute__((visibility("default")))

// Exports that cuda.h does not declare under these names: the older versions
// that the real libcuda still exports next to the ones cuda.h maps to. The
// asm labels give the exact symbol names (the plain names are macros).
extern "C" {
__attribute__((visibility("default"))) CUresult xmc_fake_cuDeviceGetUuid_v1(CUuuid* uuid, CUdevice dev)
    __asm__("cuDeviceGetUuid");
__attribute__((visibility("default"))) CUresult xmc_fake_cuEventElapsedTime_v1(float* ms, CUevent a,
                                                                               CUevent b)
    __asm__("cuEventElapsedTime");
__attribute__((visibility("default"))) CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags,
                                                               CUdevice dev);
}

namespace xmc_fake {

inline constexpr int kDriverVersion = 13000;           // CUDA 13.0, driver 580
inline constexpr size_t kGranularity = 2u << 20;        // VMM granularity (recorded on H200)
inline constexpr size_t kMaxDevices = 16;

// ---- objects ---------------------------------------------------------------

struct Device {
    int physical = 0;        // physical index; UUID, name, bus id follow it
    CUuuid uuid{};
    std::string name;
    size_t total = 0;        // bytes of "device memory"
    size_t used = 0;         // by cuMemAlloc and cuMemCreate
    std::map<int, int> attr_overrides;
};

struct Stream;
struct Event;

struct Context {
    uint64_t handle = 0;
    int ordinal = 0;              // CUdevice of the context
    bool primary = false;
    int refs = 0;                 // primary: outstanding retains; created: 1 while alive
    bool alive = false;
    CUresult sticky = CUDA_SUCCESS;
    std::shared_ptr<Stream> null_stream;  // the context's default stream, made on first use
    std::set<uint64_t> peers;             // contexts with peer access enabled from this one
};

struct Allocation {  // cuMemAlloc
    uintptr_t base = 0;
    size_t size = 0;        // asked
    size_t mapped = 0;      // mmap length (page multiple)
    uint64_t ctx = 0;
    int ordinal = 0;
    // Once exported (cuIpcGetMemHandle, fake_cuda_ipc.cpp): the memfd now behind the range, shared
    // with the processes that open it, and the export's id (unique in this process, in the handle).
    int share_fd = -1;
    uint64_t share_id = 0;
    uint64_t buffer_id = 0;  // CU_POINTER_ATTRIBUTE_BUFFER_ID: new for every allocation and mapping
};

// Device memory of another process, opened here by cuIpcOpenMemHandle (fake_cuda_ipc.cpp): its
// memfd mapped at `base`, until the last cuIpcCloseMemHandle.
struct IpcOpened {
    uintptr_t base = 0;
    size_t size = 0;        // mapped bytes (the exporter's whole allocation, pages)
    uint64_t ctx = 0;       // the context that opened it
    int ordinal = 0;
    int32_t pid = 0;        // the exporter and its export id
    uint64_t id = 0;
    int refs = 1;           // opens not closed yet (recorded by the driver docs: counted)
    uint64_t buffer_id = 0;  // CU_POINTER_ATTRIBUTE_BUFFER_ID: new for every allocation and mapping
};

struct FreedRange {  // cuMemFree'd device memory, kept reserved (PROT_NONE) until reused
    size_t size = 0;    // bytes (page multiple)
};

struct Registration {  // cuMemHostRegister
    uintptr_t base = 0;
    size_t size = 0;
    unsigned flags = 0;
    uint64_t ctx = 0;
    int ordinal = 0;
    uintptr_t dev_base = 0;  // == base unless a nonidentity fault applied
    size_t mapped = 0;       // cuMemHostAlloc: the driver's own pages (mmap length), else 0
    uint64_t buffer_id = 0;  // CU_POINTER_ATTRIBUTE_BUFFER_ID: new for every allocation and mapping
};

struct Reservation {  // cuMemAddressReserve
    uintptr_t base = 0;
    size_t size = 0;
};

struct PhysHandle {  // cuMemCreate
    uint64_t handle = 0;
    int ordinal = 0;
    size_t size = 0;
    int fd = -1;             // memfd holding the memory
    bool released = false;   // cuMemRelease called; freed when map_count reaches 0
    int map_count = 0;
    int refs = 1;            // cuMemCreate or import, and each cuMemRetainAllocationHandle
    bool shareable = false;  // created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR (or imported)
    bool imported = false;   // cuMemImportFromShareableHandle: another process's memory, not counted here
};

struct Mapping {  // cuMemMap
    uintptr_t va = 0;
    size_t size = 0;
    uint64_t handle = 0;
    size_t offset = 0;
    int host_prot = 0;                // PROT_* currently applied
    std::map<int, unsigned> access;   // device ordinal -> CUmemAccess_flags
    uint64_t buffer_id = 0;  // CU_POINTER_ATTRIBUTE_BUFFER_ID: new for every allocation and mapping
};

// A host function handed by a stream worker to the process-wide callback
// thread (see fake_cuda_stream.cpp); the worker waits for `done`.
struct HostCall {
    CUhostFn fn = nullptr;
    void* user = nullptr;
    bool done = false;       // it ran
    bool cancelled = false;  // its stream was abandoned before it started: skip it
};

// One unit of stream work, run in order by the stream's worker.
struct Op {
    enum class Kind { copy, host_fn, record, wait, wait_value, write_value, work } kind = Kind::copy;
    std::function<CUresult()> copy;  // runs under the mutex; an error becomes the sticky error
    uint64_t exec_delay_us = 0;      // copy: an exec_delay fault holds it back this long (unlocked)
    CUhostFn fn = nullptr;
    void* user = nullptr;
    std::shared_ptr<Event> event;
    uint64_t gen = 0;  // record: the generation it completes; wait: the generation awaited
    // wait_value / write_value (cuStreamWaitValue32 / cuStreamWriteValue32):
    // the device address of the 32-bit word, the operand and the flags.
    uintptr_t addr = 0;
    uint32_t value = 0;
    unsigned flags = 0;
    // work (xmc_fake_cuda_stream_enqueue): another fake's work, run on the stream's worker without
    // the mutex; the stream waits until it returns.
    void (*work)(void*) = nullptr;
};

struct Capture;

struct Stream {
    uint64_t handle = 0;   // 0 for a context's default stream
    uint64_t ctx = 0;
    unsigned flags = 0;
    std::shared_ptr<Capture> capture;  // the capture it belongs to (began it or was forked into it)
    std::deque<Op> queue;  // an op stays at the front until it has finished
    bool stop = false;     // exit once the queue is empty
    bool abandon = false;  // exit now, dropping queued ops (reset)
    bool exited = false;
    std::thread worker;
};

struct Event {
    uint64_t handle = 0;
    uint64_t ctx = 0;
    unsigned flags = 0;
    uint64_t recorded = 0;   // generations issued by cuEventRecord
    uint64_t completed = 0;  // generations whose record has run
    std::chrono::steady_clock::time_point when{};
    // Last recorded inside a capture (fake_cuda_graph.cpp): its id (0: not), the
    // stream that recorded it and how many of the capture's ops that stream had then.
    uint64_t captured_in = 0;
    uint64_t captured_stream = 0;
    size_t captured_at = 0;
};

// ---- capture and graphs (fake_cuda_graph.cpp) -----------------------------------

// A stream capture in progress: the ops its streams enqueue, recorded in the
// order they were enqueued (which is an order of the captured graph's
// dependencies: every op comes after what it depends on).
struct Capture {
    uint64_t id = 0;
    uint64_t origin = 0;                 // the stream that began it (ends it)
    uint64_t ctx = 0;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    std::thread::id thread;              // that began it
    bool invalidated = false;
    std::vector<Op> ops;
    std::set<uint64_t> members;          // streams in it: the origin and those forked into it
    std::map<uint64_t, size_t> last_op;  // forked stream -> ops.size() after its latest op
    std::map<uint64_t, size_t> joined;   // forked stream -> what of it the origin has waited for
};

// A graph (cuStreamEndCapture) and an executable graph (cuGraphInstantiate):
// the ops to queue, in order, on the stream a launch names.
struct Graph {
    uint64_t ctx = 0;
    std::vector<Op> ops;
};

// ---- faults -------------------------------------------------------------------

// The fault-script dialect of this fake (entry points from entry_points(),
// CUresult names); the grammar and its parser are shared (fakes/common/).
const xmc_faults::Dialect& fault_dialect();

// The nonidentity offset the fault rules chose for the current call of
// cuMemHostRegister on this thread (set by enter(); 0 = identity).
uint64_t current_nonidentity_offset();
// The exec_delay the fault rules chose for the copy the current call queues
// on this thread (set by enter(); microseconds, 0 = none).
uint64_t current_exec_delay_us();

// ---- the state ------------------------------------------------------------------

struct Config {
    int device_count = 2;
    std::vector<int> order;              // ordinal -> physical
    std::vector<size_t> mem_bytes;       // per physical device
    size_t stream_pool_bytes = 0;        // XMC_FAKE_CUDA_STREAM_POOL_BYTES (fake_cuda_stream.cpp)
    std::vector<std::pair<int, std::pair<int, int>>> attrs;  // (physical or -1, (attr, value))
    std::string faults;
    bool trace = false;
    std::string error;                   // non-empty: malformed configuration
};

struct State {
    std::mutex mu;
    std::condition_variable cv;

    bool initialized = false;
    uint64_t epoch = 1;          // bumped by reset: thread-local context stacks of older epochs are empty
    uint64_t next_handle = 1;
    Config config;
    std::string last_error;

    std::vector<Device> devices;                        // by ordinal
    std::map<uint64_t, std::shared_ptr<Context>> contexts;
    std::vector<uint64_t> primary;                      // ordinal -> primary context handle
    std::map<uint64_t, std::shared_ptr<Stream>> streams;
    std::map<uint64_t, size_t> stream_high;  // context -> most live streams so far
    std::vector<std::shared_ptr<Stream>> retired;       // destroyed, worker still draining
    std::map<uint64_t, std::shared_ptr<Event>> events;
    std::map<uintptr_t, Allocation> allocations;        // by base
    std::map<uintptr_t, FreedRange> freed;              // by base, disjoint, adjacent ones merged
    std::map<uintptr_t, Registration> registrations;    // by host base
    std::map<uintptr_t, Reservation> reservations;      // by base
    std::map<uint64_t, PhysHandle> handles;
    std::map<uintptr_t, Mapping> mappings;              // by va
    std::map<uintptr_t, IpcOpened> ipc_opened;          // by base (fake_cuda_ipc.cpp)
    std::map<uint64_t, std::shared_ptr<Capture>> captures;  // in progress, by id
    std::map<uint64_t, Graph> graphs;                   // CUgraph handles
    std::map<uint64_t, Graph> execs;                    // CUgraphExec handles
    // VMM-DOUBLE's ledger: each unmap of a mapping and each release of a physical handle is
    // recorded once; a second one (which the real driver answers CUDA_SUCCESS for an unmap,
    // and may crash on for other uses of a released handle) is counted.
    std::set<uintptr_t> unmapped;                       // vas unmapped since last mapped
    std::set<uint64_t> released;                        // handles released
    size_t second_releases = 0;

    // Host functions of every stream run on this one thread, one at a time,
    // in the order their streams reach them (as on the real driver).
    std::deque<std::shared_ptr<HostCall>> host_calls;
    std::thread callback_thread;
    bool callback_running = false;  // a host function is running now
    bool callback_stop = false;

    std::vector<xmc_faults::Rule> rules;
    bool rules_from_api = false;
    std::map<std::string, uint64_t, std::less<>> calls;  // by base name
    uint64_t total_calls = 0;
    // The calling thread of each call since the records' reset (at most
    // XMC_FAKE_CUDA_CALL_RECORDS kept; call_records_seen counts them all).
    std::vector<xmc_fake_cuda_call_record> call_records;
    size_t call_records_seen = 0;
    size_t reclaimed = 0;
};

State& state();

// ---- helpers shared by the areas (all *_locked: caller holds state().mu) ----------

// Runs at the top of every entry point: counts the call, refuses it on a host
// callback thread, applies fault rules (sleeping for delays without the lock),
// and checks cuInit was called when `need_init`. CUDA_SUCCESS means: go on.
// `size` (null: none) is the call's size argument, for size_limit rules: the
// entries marked kSized in entry_points() pass it (FAKE_ENTER_SIZE).
CUresult enter(const char* name, bool need_init, const uint64_t* size = nullptr);

#define FAKE_ENTER(name)                                                   \
    do {                                                                   \
        CUresult fake_r_ = ::xmc_fake::enter(name, true);                  \
        if (fake_r_ != CUDA_SUCCESS) return fake_r_;                       \
    } while (0)
#define FAKE_ENTER_SIZE(name, bytes)                                       \
    do {                                                                   \
        const uint64_t fake_size_ = (bytes);                               \
        CUresult fake_r_ = ::xmc_fake::enter(name, true, &fake_size_);     \
        if (fake_r_ != CUDA_SUCCESS) return fake_r_;                       \
    } while (0)
#define FAKE_ENTER_NO_INIT(name)                                           \
    do {                                                                   \
        CUresult fake_r_ = ::xmc_fake::enter(name, false);                 \
        if (fake_r_ != CUDA_SUCCESS) return fake_r_;                       \
    } while (0)

// True on a thread that is running a host function right now.
bool in_host_callback();
void set_in_host_callback(bool v);
// Marks the calling thread as the process-wide host-callback thread (call records).
void set_on_callback_thread();

uint64_t new_handle_locked();
template <class H>
H to_handle(uint64_t v) { return reinterpret_cast<H>(static_cast<uintptr_t>(v)); }
template <class H>
uint64_t from_handle(H h) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(h)); }

// The current context of the calling thread, or null with *err set
// (CUDA_ERROR_INVALID_CONTEXT, or the context's sticky error when check_sticky).
Context* current_ctx_locked(CUresult* err, bool check_sticky = true);
Context* find_ctx_locked(uint64_t handle);  // alive contexts only
void ctx_stack_clear_if_stale();             // per-thread stack vs. reset epoch
std::vector<uint64_t>& ctx_stack();

bool valid_ordinal_locked(int ordinal);
int device_attribute_locked(int ordinal, int attr, bool* known);

// Streams: find a stream handle (0/legacy/per-thread give the current
// context's default stream), start a worker, wait for streams to drain.
std::shared_ptr<Stream> find_stream_locked(CUstream s, CUresult* err);
std::shared_ptr<Stream> make_stream_locked(uint64_t handle, uint64_t ctx, unsigned flags);
void wait_idle_locked(std::unique_lock<std::mutex>& lk, const std::shared_ptr<Stream>& s);
void retire_stream_locked(const std::shared_ptr<Stream>& s);  // stop after draining, join later
// Stops the callback thread once the host function it runs (if any) returns;
// queued ones are dropped. Releases and reacquires lk. With a timeout, a
// thread still stuck in a host function after it is detached (unload).
void stop_callback_thread_locked(std::unique_lock<std::mutex>& lk, std::chrono::milliseconds timeout);
void reap_retired_locked();                                   // join retired workers that exited

// Destroys a context's resources (streams drained first; frees what the
// program left behind, counting it as reclaimed). Releases and reacquires lk.
void destroy_context_locked(std::unique_lock<std::mutex>& lk, Context* c);

// Device-side address resolution for copies: the host address at which the
// device range [addr, addr+n) lives, or 0 when no allocation, mapped and
// accessible VMM range, or registration holds all of it.
uintptr_t device_to_host_locked(uintptr_t addr, size_t n);
// True when [addr, addr+n) touches a VMM reservation (device-only memory).
bool in_reservation_locked(uintptr_t addr, size_t n);
// True when [addr, addr+n) touches device memory: an allocation (its whole
// mapping), freed device memory, or a VMM reservation. A copy's side that is
// not held by one allocation, mapping or registration is host memory only
// when this is false (recorded: a copy one byte past an allocation,
// copy_1d_past_end, is CUDA_ERROR_INVALID_VALUE).
bool in_device_range_locked(uintptr_t addr, size_t n);
// cuMemFree of one allocation (also context destruction): its memory goes
// back to the device, its range stays reserved as freed device memory.
void free_allocation_locked(std::map<uintptr_t, Allocation>::iterator it);
// Puts PROT_NONE pages over [base, base+size) and keeps the range as freed device memory (a copy
// that still names it is refused, never a read of unmapped memory). cuMemFree and the last
// cuIpcCloseMemHandle.
void retire_range_locked(uintptr_t base, size_t size);
// IPC (fake_cuda_ipc.cpp): opened ranges for copies and pointer queries, and reset.
IpcOpened* find_ipc_opened_locked(uintptr_t addr);
void ipc_free_all_locked();

// Capture (fake_cuda_graph.cpp), all with the lock held. The ops of a stream
// go through queue_op_locked: into its queue, or into its capture (refused
// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED once the capture is invalidated), and
// for the legacy default stream the implicit dependency on a blocking stream
// that captures (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, the capture invalidated).
CUresult queue_op_locked(const std::shared_ptr<Stream>& s, Op op);
// cuStreamSynchronize and cuStreamQuery of a capturing stream: the refusal,
// which invalidates the capture.
CUresult refuse_in_capture_locked(Stream& s);
// cuEventRecord on a capturing stream: the event marks a point of the capture.
CUresult capture_record_locked(Stream& s, Event& e);
// cuStreamWaitEvent where the stream captures or the event was recorded in a
// capture (*handled true): a join, a fork, or the refusal.
CUresult capture_wait_locked(const std::shared_ptr<Stream>& s, Event& e, bool* handled);
// cuEventQuery and cuEventSynchronize of an event recorded in a capture in progress.
CUresult captured_event_locked(const Event& e);
// cuMemAlloc and cuMemHostRegister: refused where a capture forbids them to
// this thread (global mode: any thread; thread-local: the capturing one), and
// that capture invalidated.
CUresult unsafe_in_capture_locked();
// cuStreamDestroy of a stream in a capture.
void stream_leaves_capture_locked(Stream& s);
// Reset: every capture and graph goes.
void graphs_free_all_locked();
// Ledger lines of graphs and executable graphs (live objects).
void graph_ledger_locked(std::string& body, size_t& live);

// Frees everything (reset and unload). Releases and reacquires lk.
void free_all_locked(std::unique_lock<std::mutex>& lk);
void vmm_free_all_locked();

// Ledger text and live-object count.
std::string ledger_locked(size_t* live);

// Reads the environment into a Config (error set when malformed).
Config read_config();

// CUresult name and description (null when unknown).
const char* result_name(CUresult r);
const char* result_string(CUresult r);
bool result_from_name(std::string_view name, CUresult* out);

// Entry points: base name -> exported function, for cuGetProcAddress and the
// fault scripts. Versioned exports map to their newest version.
enum EntryFaults : unsigned {
    kSized = 1,        // size_limit: enter() gets the call's size (FAKE_ENTER_SIZE)
    kQueued = 2,       // exec_delay: the call queues a copy that the delay holds back
    kNonIdentity = 4,  // nonidentity: cuMemHostRegister
};
struct EntryPoint {
    const char* base;
    const char* symbol;
    void* fn;
    int min_version;  // cudaVersion from which this symbol is what cuGetProcAddress gives
    unsigned faults = 0;           // EntryFaults
    uint64_t (*live)() = nullptr;  // exhaust: live objects this entry made (lock held)
};
const std::vector<EntryPoint>& entry_points();
// Strips a trailing _vN suffix (cuMemAlloc_v2 -> cuMemAlloc).
std::string_view base_name(std::string_view name);

}  // namespace xmc_fake

#endif
