// The harness of the VMM-* tests (conformance/tests/test_vmm*.cpp, five files that share
// vmm_tests.hpp): the data a
// slot is filled with, gates that hold a stream, an instance of the backend
// with what slot tests need (Env), the fault hook of the slot workers' driver
// calls, and the fixture. Slot contents are only ever read and written through
// the backend's own copies, into poisoned buffers, and compared with random
// data; memory facts come from the OS (/proc/self/maps, a forked child's
// death) or the device's free memory, never from a request's word alone.
//
// Steps that must wait are held with a gate: a host callback that blocks its
// stream until the test opens it. The real CUDA driver (and so the fake) runs
// the host callbacks of ALL streams one at a time on one thread, so a shut
// gate also holds every other host callback: a test shuts at most one gate at
// a time and never waits for another host callback while it is shut. It
// watches progress through the backend's own requests (a later request on the
// stream completing), never through host-callback flags. A backend must not
// need host callbacks to make progress (VMM-CALLBACK).
// When a backend is caught doing what a gate was there to prevent (a release
// before the stream's prior work, a close under a running copy, a stuck
// serial worker), opening the gate would let it write into unmapped memory or
// hang the run; the test then leaves that instance open with its gate shut
// (VmmTest::leak) and moves on.
#pragma once
#include "driver_control.hpp"
#include "fixture.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace xmc::conformance {

constexpr uint32_t kWaitMs = 10000;               // a request that takes longer is stuck
constexpr std::chrono::milliseconds kWatch{300};  // how long a step held by a gate is watched not to happen
constexpr char kPoison = 0x5A;                    // fills every buffer a read lands in

// ---- data -------------------------------------------------------------------

// The bytes of `tag`: random (a table of random words per tag, each word
// also mixed with its offset so a misplaced block shows), reproducible, the
// same prefix at any length, and cheap enough to write and check megabytes.
void fill(char *p, size_t n, int tag);
std::vector<char> pattern(int tag, size_t n);
// Offset of the first byte of `got` that is not tag's, or SIZE_MAX; `got`
// holds the bytes from offset `at` (a multiple of 8) on.
size_t mismatch(const std::vector<char> &got, int tag, size_t at = 0);
// `got` is tag's bytes; else where it first differs (and whether that byte is
// still the poison: nothing was copied).
::testing::AssertionResult holds(const std::vector<char> &got, int tag);

// Does a mapping backed by a memfd overlap [addr, addr+n)? (/proc/self/maps;
// the host backend and the fake CUDA driver back slots with memfds.)
bool memfd_backed(const void *addr, size_t n);
// The lines of /proc/self/maps, and those of `maps` whose range overlaps
// [addr, addr+n): what a closed slot must leave of its range is what was
// there before it was created (VMM-CLOSE).
std::vector<std::string> read_maps();
std::vector<std::string> maps_overlapping(const std::vector<std::string> &maps, const void *addr, size_t n);
// How many mappings of memfds the process has (the host and the fake CUDA
// driver back slots with memfds; each slot mapping is one).
size_t memfd_mappings();
// The fake driver's address reservations and mappings (its ledger lines) that
// overlap [addr, addr+n).
std::vector<std::string> ledger_ranges_overlapping(const DriverControl &c, const void *addr, size_t n);
// The wait status of a forked child that runs `touch` and exits with its result.
int in_child(const std::function<int()> &touch);
bool died_by_fault(int status);

// Polls `pred` until it holds or `limit` passes.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

// Makes the driver's lazy allocations happen before a test measures: a
// stream created, run (a host callback, an event) and destroyed, a pinned
// block, a slot created, copied into and out of, and closed. On the H200 the
// first stream creation keeps 2 MiB of device memory for good: a free-memory
// check that brackets it measures the driver, not the call under test.
// Env::open calls it; a test that measures on an instance of its own calls it
// before its first snapshot. No release or remap: the host's test-only fault
// options count those.
void warm_up(const xmc_backend *api, xmc_instance *inst);

// ---- gates ------------------------------------------------------------------

struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
    static void hold(void *g) {
        auto *self = static_cast<Gate *>(g);
        std::unique_lock<std::mutex> lock(self->mu);
        self->cv.wait(lock, [&] { return self->open; });
    }
    void release() {
        std::lock_guard<std::mutex> lock(mu);
        open = true;
        cv.notify_all();
    }
};

// ---- an instance of the backend under test, with what slot tests need -------

// Every handle an Env makes is recorded, so that its destructor can finish
// and free it; a test closes or destroys early only what it checks.
struct Env {
    const xmc_backend *api = nullptr;
    xmc_instance *inst = nullptr;
    xmc_stream *io = nullptr;  // the test's own reads and writes of slot bytes
    std::vector<xmc_stream *> streams;
    std::vector<xmc_slot *> slots;        // open, as far as the test knows
    std::vector<xmc_request *> requests;  // not destroyed
    std::vector<void *> pinned;
    std::vector<std::shared_ptr<Gate>> gates;
    bool leaked = false;

    // An instance opened with `options` and its io stream; nullptr and *why when either fails.
    static std::unique_ptr<Env> open(const xmc_backend *api, const char *options, std::string *why);
    // Closes everything, in the order that never unmaps under running work:
    // gates open, requests finish, streams drain, slots close, then the rest.
    ~Env();
    // Leaves the instance open with its gates shut: the backend was caught
    // about to write into memory it unmapped, or stuck (see the file comment).
    void leak() { leaked = true; }

    // The last error as one line: status, native code, call, message.
    std::string error() const;
    ::testing::AssertionResult ok(xmc_status got) const;
    // A refusal carries its own status and detail naming the call (SPEC 3).
    ::testing::AssertionResult refused(xmc_status want, xmc_status got, const char *call) const;

    xmc_stream *stream();
    // Blocks `s` until the gate is opened.
    std::shared_ptr<Gate> gate(xmc_stream *s);
    // A pinned block of n bytes holding tag's data.
    void *source(size_t n, int tag);
    void free_source(void *p);

    xmc_slot *create(size_t bytes, xmc_slot_info *info);
    xmc_status close(xmc_slot *s);

    // A slot as a test starts from it: its handle (NULL when create failed)
    // and what create said of it.
    struct Slot {
        xmc_slot *slot = nullptr;
        xmc_slot_info info{};
    };
    // A mapped slot of `bytes`.
    Slot mapped_slot(size_t bytes);
    // A slot of `bytes` released and waited for: ready for a remap.
    Slot released_slot(size_t bytes);
    // ... with a pinned source of the slot's size holding tag's bytes.
    struct SlotAndSource {
        xmc_slot *slot = nullptr;
        xmc_slot_info info{};
        void *source = nullptr;
    };
    SlotAndSource released_slot_with_source(size_t bytes, int tag);

    // Request helpers: record what was made, so the destructor can finish it.
    xmc_status release(xmc_slot *s, xmc_stream *on, xmc_request **r);
    xmc_status remap(xmc_slot *s, xmc_stream *on, const void *src, size_t n, uint32_t flags, xmc_request **r);
    xmc_status release_batch(const std::vector<xmc_slot *> &s, xmc_stream *on, xmc_request **r);
    xmc_status remap_batch(const std::vector<xmc_slot *> &s, xmc_stream *on, const std::vector<const void *> &src,
                           const std::vector<size_t> &n, uint32_t flags, xmc_request **r);
    xmc_status wait(xmc_request *r, uint32_t ms = kWaitMs) { return api->request_wait(inst, r, ms); }
    xmc_status destroy(xmc_request *r);
    xmc_request_info query(xmc_request *r);

    // Copies through the backend, on io, then waits for io.
    bool write(const xmc_slot_info &slot, int tag);
    // The slot's bytes, read on `s` (default: io), which is then waited for.
    std::vector<char> read(const xmc_slot_info &slot, xmc_stream *s = nullptr);
    // Enqueues a read of the slot on `s` into a poisoned buffer; the caller
    // synchronizes, then looks at bytes(). The buffer is pinned for the slot's
    // device: a real driver finishes a copy into pageable memory before the
    // call returns, which on a gated stream would wait for the gate (seen on
    // the H200; the fake does the same).
    struct PendingRead {
        const char *data = nullptr;
        size_t size = 0;
        std::vector<char> bytes() const { return data ? std::vector<char>(data, data + size) : std::vector<char>(); }
    };
    std::shared_ptr<PendingRead> read_async(const xmc_slot_info &slot, xmc_stream *s);

    uint64_t free_memory();

    // ---- graphs over slots (VMM-GRAPH, VMM-GRAPH-ORDER) ----
    // Recorded on `on` (capture begun and ended here): a graph that copies the
    // whole slot into `out` (slot.size bytes), or `in` into the whole slot.
    // The destructor destroys every graph made here and ends a capture a
    // failed test left open (begin_capture records it).
    std::vector<xmc_graph *> graphs;
    std::vector<xmc_stream *> capturing;
    xmc_graph *capture_read(const xmc_slot_info &slot, xmc_stream *on, void *out);
    xmc_graph *capture_write(const xmc_slot_info &slot, xmc_stream *on, const void *in);
    xmc_status begin_capture(xmc_stream *on);
    xmc_graph *end_capture(xmc_stream *on);
    // Pinned memory (registered with the slot's device where the backend can),
    // poisoned: what a graph reads a slot into.
    char *graph_buffer(size_t n);

    static xmc_copy_desc linear(void *src, xmc_mem_kind sk, void *dst, xmc_mem_kind dk, size_t n);
};

// ---- fault injection (VMM-ASYNC-ERROR) --------------------------------------

// How to make the k-th map or unmap of a slot worker fail: the host backend's
// test-only open options, or the fake CUDA driver's fault script (armed after
// the test's slots exist, so slot_create's own maps are not counted).
struct FaultHook {
    std::string options;
    const DriverControl *driver = nullptr;
    std::string script;
    int64_t code = 0;  // the native code the failure must carry
    std::string why;   // empty when there is a hook
    // A script the fake refuses would inject nothing: the test would pass with no failure to handle.
    void arm() const {
        if (driver) { ASSERT_EQ(driver->set_faults(script.c_str()), 0) << "the fake refused the fault script '" << script << "'"; }
    }
    void disarm() const {
        if (driver) { EXPECT_EQ(driver->set_faults(""), 0); }
    }
};
FaultHook fault_hook(const xmc_backend *api, bool unmap, int k);

// ---- the fixture ------------------------------------------------------------

// Skips where the backend has no device; e() is an instance of the backend
// opened for the test. Over a fake driver, TearDown checks that closing the
// instances left nothing alive in it (unless an instance was leaked).
class VmmTest : public BackendTest {
protected:
    void SetUp() override;
    void TearDown() override;

    // Closes e() and opens it again with the backend's open `options`.
    ::testing::AssertionResult reopen(const std::string &options);
    // Leaves e() open (see the file comment); the test then returns.
    void leak();

    Env &e() { return *env_; }
    std::unique_ptr<Env> env_;
    bool leaked_any_ = false;
};

} // namespace xmc::conformance
