// VMM-*: fixed-address slots (SPEC 5). One body per requirement, run on every
// selected backend; the slot model (reference/model/slot_model.hpp) is the
// oracle of the stateful properties. Slot contents are only ever read and
// written through the backend's own copies, into poisoned buffers, and
// compared with random data; memory facts come from the OS (/proc/self/maps,
// a forked child's death) or the device's free memory, never from a request's
// word alone.
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
// (Env::leak) and moves on.
#include "driver_control.hpp"
#include "fixture.hpp"
#include "slot_model.hpp"
#include "stateful.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <map>
#include <thread>

namespace xmc::conformance {
namespace {

using model::kNoTag;
using model::RequestKind;
using model::SlotModel;
using model::SlotState;
using model::Source;
using namespace std::chrono_literals;

constexpr uint32_t kWaitMs = 10000;     // a request that takes longer is stuck
constexpr auto kWatch = 300ms;          // how long a step held by a gate is watched not to happen
constexpr char kPoison = 0x5A;          // fills every buffer a read lands in

// ---- data -------------------------------------------------------------------

uint64_t splitmix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// The bytes of `tag`: random (a table of random words per tag, each word
// also mixed with its offset so a misplaced block shows), reproducible, the
// same prefix at any length, and cheap enough to write and check megabytes.
struct Words {
    uint64_t w[4096];
    explicit Words(int tag) {
        for (uint64_t i = 0; i < 4096; ++i) w[i] = splitmix((static_cast<uint64_t>(tag) << 20) ^ i);
    }
    uint64_t at(uint64_t i) const { return w[i & 4095] ^ (i * 0x9E3779B97F4A7C15ull); }
};

void fill(char *p, size_t n, int tag) {
    const Words t(tag);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint64_t w = t.at(i / 8);
        std::memcpy(p + i, &w, 8);
    }
    const uint64_t last = t.at(i / 8);
    std::memcpy(p + i, &last, n - i);
}

std::vector<char> pattern(int tag, size_t n) {
    std::vector<char> v(n);
    fill(v.data(), n, tag);
    return v;
}

// Offset of the first byte of `got` that is not tag's, or SIZE_MAX; `got`
// holds the bytes from offset `at` (a multiple of 8) on.
size_t mismatch(const std::vector<char> &got, int tag, size_t at = 0) {
    const Words t(tag);
    const size_t whole = got.size() / 8 * 8;
    for (size_t i = 0; i < got.size(); i += 8) {
        const uint64_t w = t.at((at + i) / 8);
        uint64_t g = 0;
        if (i < whole) std::memcpy(&g, got.data() + i, 8);  // one load
        if (i < whole && g == w) continue;
        for (size_t j = 0; j < std::min<size_t>(8, got.size() - i); ++j)
            if (got[i + j] != reinterpret_cast<const char *>(&w)[j]) return i + j;
    }
    return SIZE_MAX;
}

::testing::AssertionResult holds(const std::vector<char> &got, int tag) {
    const size_t at = mismatch(got, tag);
    if (at == SIZE_MAX) return ::testing::AssertionSuccess();
    const bool poison = static_cast<char>(got[at]) == kPoison;
    return ::testing::AssertionFailure() << "slot bytes differ from source " << tag << " at offset " << at << " of "
                                         << got.size() << (poison ? " (still the poison: nothing was copied)" : "");
}

// Does a mapping backed by a memfd overlap [addr, addr+n)? (/proc/self/maps;
// the host backend and the fake CUDA driver back slots with memfds.)
bool memfd_backed(const void *addr, size_t n) {
    const auto lo = reinterpret_cast<uintptr_t>(addr), hi = lo + n;
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
        unsigned long a = 0, b = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx", &a, &b) != 2 || b <= lo || a >= hi) continue;
        if (line.find("/memfd:") != std::string::npos) return true;
    }
    return false;
}

// The wait status of a forked child that runs `touch` and exits with its result.
int in_child(const std::function<int()> &touch) {
    const pid_t pid = fork();
    if (pid == 0) {
        // The default action: a sanitizer's handler would turn the fault into an exit.
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        _exit(touch());
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

bool died_by_fault(int status) {
    return WIFSIGNALED(status) && (WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS);
}

// Polls `pred` until it holds or `limit` passes.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(2ms);
    }
    return true;
}

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

// ---- an instance of the backend under test, with what slot tests need --------

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

    static std::unique_ptr<Env> open(const xmc_backend *api, const char *options, std::string *why) {
        auto e = std::make_unique<Env>();
        e->api = api;
        xmc_open_params p{sizeof p, options};
        if (xmc_status st = api->open(&p, &e->inst); st != XMC_OK) {
            *why = std::string("open(\"") + (options ? options : "") + "\") failed: " + xmc_status_string(st);
            e->inst = nullptr;
            return nullptr;
        }
        if (xmc_status st = api->stream_create(e->inst, 0, &e->io); st != XMC_OK) {
            *why = std::string("stream_create failed: ") + xmc_status_string(st);
            return nullptr;
        }
        return e;
    }

    // Closes everything, in the order that never unmaps under running work:
    // gates open, requests finish, streams drain, slots close, then the rest.
    ~Env() {
        if (!inst || leaked) return;
        for (auto &g : gates) g->release();
        for (auto *r : requests) api->request_wait(inst, r, kWaitMs);
        for (auto *s : streams) api->stream_synchronize(inst, s);
        if (io) api->stream_synchronize(inst, io);
        for (auto *s : slots) api->slot_close(inst, s);
        for (auto *r : requests) api->request_destroy(inst, r);
        for (auto *s : streams) api->stream_destroy(inst, s);
        if (io) api->stream_destroy(inst, io);
        for (void *p : pinned) api->pin_free(inst, p);
        api->close(inst);
    }

    // Leaves the instance open with its gates shut: the backend was caught
    // about to write into memory it unmapped, or stuck (see the file comment).
    void leak() { leaked = true; }

    std::string error() const {
        xmc_error_info e{};
        api->last_error(inst, &e);
        std::ostringstream os;
        os << "[" << xmc_status_string(e.status) << ", native " << e.native_code << ", call '" << e.call << "'] "
           << e.message;
        return os.str();
    }

    ::testing::AssertionResult ok(xmc_status got) const {
        if (got == XMC_OK) return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << "expected ok, got " << xmc_status_string(got) << " " << error();
    }

    // A refusal carries its own status and detail naming the call (SPEC 3).
    ::testing::AssertionResult refused(xmc_status want, xmc_status got, const char *call) const {
        if (got != want)
            return ::testing::AssertionFailure() << call << ": expected " << xmc_status_string(want) << ", got "
                                                 << xmc_status_string(got) << (got ? " " + error() : "");
        xmc_error_info e{};
        api->last_error(inst, &e);
        if (e.status != want || std::strcmp(e.call, call) != 0 || !e.message[0])
            return ::testing::AssertionFailure()
                   << call << ": refusal detail must carry the status and name the call; got " << error();
        return ::testing::AssertionSuccess();
    }

    xmc_stream *stream() {
        xmc_stream *s = nullptr;
        EXPECT_TRUE(ok(api->stream_create(inst, 0, &s)));
        if (s) streams.push_back(s);
        return s;
    }

    // Blocks `s` until the gate is opened.
    std::shared_ptr<Gate> gate(xmc_stream *s) {
        auto g = std::make_shared<Gate>();
        gates.push_back(g);
        EXPECT_TRUE(ok(api->host_callback(inst, s, &Gate::hold, g.get())));
        return g;
    }

    // A pinned block of n bytes holding tag's data.
    void *source(size_t n, int tag) {
        xmc_pin_result r{};
        EXPECT_TRUE(ok(api->pin_alloc(inst, n, 64, XMC_NO_DEVICE, &r)));
        if (!r.base) return nullptr;
        pinned.push_back(r.base);
        fill(static_cast<char *>(r.base), n, tag);
        return r.base;
    }
    void free_source(void *p) {
        auto it = std::find(pinned.begin(), pinned.end(), p);
        if (it == pinned.end()) return;
        pinned.erase(it);
        api->pin_free(inst, p);
    }

    xmc_slot *create(size_t bytes, xmc_slot_info *info) {
        xmc_slot *s = nullptr;
        *info = xmc_slot_info{};
        EXPECT_TRUE(ok(api->slot_create(inst, 0, bytes, &s, info))) << "slot_create(" << bytes << ")";
        if (s) slots.push_back(s);
        return s;
    }
    xmc_status close(xmc_slot *s) {
        const xmc_status st = api->slot_close(inst, s);
        if (st == XMC_OK) slots.erase(std::remove(slots.begin(), slots.end(), s), slots.end());
        return st;
    }

    // Request helpers: record what was made, so the destructor can finish it.
    xmc_status release(xmc_slot *s, xmc_stream *on, xmc_request **r) {
        const xmc_status st = api->slot_release(inst, s, on, r);
        if (st == XMC_OK) requests.push_back(*r);
        return st;
    }
    xmc_status remap(xmc_slot *s, xmc_stream *on, const void *src, size_t n, uint32_t flags, xmc_request **r) {
        const xmc_status st = api->slot_remap(inst, s, on, src, n, flags, r);
        if (st == XMC_OK) requests.push_back(*r);
        return st;
    }
    xmc_status release_batch(const std::vector<xmc_slot *> &s, xmc_stream *on, xmc_request **r) {
        const xmc_status st = api->slot_release_batch(inst, s.data(), s.size(), on, r);
        if (st == XMC_OK) requests.push_back(*r);
        return st;
    }
    xmc_status remap_batch(const std::vector<xmc_slot *> &s, xmc_stream *on, const std::vector<const void *> &src,
                           const std::vector<size_t> &n, uint32_t flags, xmc_request **r) {
        const xmc_status st = api->slot_remap_batch(inst, s.data(), s.size(), on, src.data(), n.data(), flags, r);
        if (st == XMC_OK) requests.push_back(*r);
        return st;
    }
    xmc_status wait(xmc_request *r, uint32_t ms = kWaitMs) { return api->request_wait(inst, r, ms); }
    xmc_status destroy(xmc_request *r) {
        const xmc_status st = api->request_destroy(inst, r);
        if (st == XMC_OK) requests.erase(std::remove(requests.begin(), requests.end(), r), requests.end());
        return st;
    }
    xmc_request_info query(xmc_request *r) {
        xmc_request_info i{};
        EXPECT_TRUE(ok(api->request_query(inst, r, &i)));
        return i;
    }

    // Copies through the backend, on `s` (default: io), then waits for `s`.
    bool write(const xmc_slot_info &slot, int tag) {
        std::vector<char> data = pattern(tag, slot.size);
        xmc_copy_desc d = linear(data.data(), XMC_MEM_HOST, slot.address, XMC_MEM_DEVICE, slot.size);
        return ok(api->copy(inst, &d, io)) && ok(api->stream_synchronize(inst, io));
    }
    std::vector<char> read(const xmc_slot_info &slot, xmc_stream *s = nullptr) {
        auto out = read_async(slot, s ? s : io);
        EXPECT_TRUE(ok(api->stream_synchronize(inst, s ? s : io)));
        std::vector<char> got = out->bytes();
        free_source(const_cast<char *>(out->data));
        return got;
    }
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
    std::shared_ptr<PendingRead> read_async(const xmc_slot_info &slot, xmc_stream *s) {
        auto out = std::make_shared<PendingRead>();
        xmc_pin_result r{};
        const int32_t dev = (api->capabilities & XMC_CAP_PIN_REGISTER) ? slot.device : XMC_NO_DEVICE;
        EXPECT_TRUE(ok(api->pin_alloc(inst, slot.size, 64, dev, &r)));
        if (!r.base) return out;
        pinned.push_back(r.base);
        std::memset(r.base, kPoison, slot.size);
        out->data = static_cast<const char *>(r.base);
        out->size = slot.size;
        xmc_copy_desc d = linear(slot.address, XMC_MEM_DEVICE, r.base, XMC_MEM_PINNED, slot.size);
        EXPECT_TRUE(ok(api->copy(inst, &d, s)));
        return out;
    }

    uint64_t free_memory() {
        uint64_t f = 0, t = 0;
        EXPECT_TRUE(ok(api->device_free_memory(inst, 0, &f, &t)));
        return f;
    }

    static xmc_copy_desc linear(void *src, xmc_mem_kind sk, void *dst, xmc_mem_kind dk, size_t n) {
        xmc_copy_desc d{};
        d.src = {src, sk, 0, 0, 0, 0, n, n};
        d.dst = {dst, dk, 0, 0, 0, 0, n, n};
        d.width_bytes = n;
        d.height = d.depth = 1;
        return d;
    }
};

// ---- fault injection (VMM-ASYNC-ERROR) ----------------------------------------

// How to make the k-th map or unmap of a slot worker fail: the host backend's
// test-only open options, or the fake CUDA driver's fault script (armed after
// the test's slots exist, so slot_create's own maps are not counted).
struct FaultHook {
    std::string options;
    const DriverControl *driver = nullptr;
    std::string script;
    int64_t code = 0;  // the native code the failure must carry
    std::string why;   // empty when there is a hook
    void arm() const {
        if (driver) driver->set_faults(script.c_str());
    }
    void disarm() const {
        if (driver) driver->set_faults("");
    }
};

FaultHook fault_hook(const xmc_backend *api, bool unmap, int k) {
    FaultHook h;
    const std::string key = unmap ? "vmm_fail_unmap" : "vmm_fail_map";
    xmc_instance *probe = nullptr;
    const std::string probe_opts = key + "=1000000";
    xmc_open_params p{sizeof p, probe_opts.c_str()};
    if (api->open(&p, &probe) == XMC_OK) {
        api->close(probe);
        h.options = key + "=" + std::to_string(k);
        h.code = ENOMEM;
        return h;
    }
    std::string why;
    const DriverControl *c = driver_control(api, &why);
    void *lib = c ? dlopen(c->library.c_str(), RTLD_NOW | RTLD_NOLOAD) : nullptr;
    if (lib && dlsym(lib, "xmc_fake_cuda_set_faults")) {
        h.driver = c;
        h.script =
            std::string(unmap ? "fail:cuMemUnmap:CUDA_ERROR_UNKNOWN@" : "fail:cuMemMap:CUDA_ERROR_OUT_OF_MEMORY@") +
            std::to_string(k);
        h.code = unmap ? 999 : 2;
        return h;
    }
    if (lib && dlsym(lib, "xmc_fake_ze_set_faults")) {
        // The same two failures in Level Zero's terms (ZE_RESULT_ERROR_UNKNOWN,
        // ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY).
        h.driver = c;
        h.script = std::string(unmap ? "fail:zeVirtualMemUnmap:ZE_RESULT_ERROR_UNKNOWN@"
                                     : "fail:zeVirtualMemMap:ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY@") +
                   std::to_string(k);
        h.code = unmap ? 0x7ffffffe : 0x70000003;
        return h;
    }
    h.why = "backend '" + std::string(api->name) +
            "' has no way to fail a slot worker's driver call (no vmm_fail_* option, no fake driver with VMM faults)" +
            (why.empty() ? "" : "; " + why);
    return h;
}

// ---- the fixture --------------------------------------------------------------

class VmmTest : public BackendTest {
protected:
    void SetUp() override {
        BackendTest::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        int32_t devices = 0;
        ASSERT_EQ(api->device_count(inst, &devices), XMC_OK) << last_error();
        if (devices == 0) XMC_SKIP(SkipKind::NoDevice, "backend '" << api->name << "' reports no device");
        env_ = open_env("");
        ASSERT_NE(env_, nullptr);
    }
    void TearDown() override {
        env_.reset();
        BackendTest::TearDown();
        // Over a fake driver: closing the instances left nothing alive in it.
        if (!leaked_any_)
            if (const DriverControl *c = driver_control(api, nullptr)) {
                EXPECT_EQ(c->live_objects(), 0u) << "the backend left driver objects behind:\n" << c->ledger_text();
            }
    }

    std::unique_ptr<Env> open_env(const std::string &options) {
        std::string why;
        auto e = Env::open(api, options.c_str(), &why);
        EXPECT_NE(e, nullptr) << why;
        return e;
    }
    // An Env that this test may have to leave open (see the file comment).
    void leak(std::unique_ptr<Env> &e) {
        e->leak();
        e.release();
        leaked_any_ = true;
    }

    Env &e() { return *env_; }
    std::unique_ptr<Env> env_;
    bool leaked_any_ = false;
};

// A slot of `bytes` released and waited for: ready for a remap.
struct Released {
    xmc_slot *slot = nullptr;
    xmc_slot_info info{};
};
Released released_slot(Env &v, size_t bytes) {
    Released r;
    r.slot = v.create(bytes, &r.info);
    xmc_request *q = nullptr;
    if (r.slot && v.ok(v.release(r.slot, v.io, &q))) {
        EXPECT_TRUE(v.ok(v.wait(q)));
        v.destroy(q);
    }
    return r;
}

// ---- VMM-CREATE -----------------------------------------------------------------

TEST_P(VmmTest, VMM_CREATE_RoundsUpToGranularityMapsAndGrantsAccess) {
    Env &v = e();
    const uint64_t free0 = v.free_memory();
    xmc_slot_info one{};
    ASSERT_NE(v.create(1, &one), nullptr);
    const size_t g = one.size;  // the granularity: what one byte rounds up to
    ASSERT_GT(g, 0u);
    EXPECT_NE(one.address, nullptr);
    EXPECT_EQ(one.device, 0);
    EXPECT_EQ(v.free_memory(), free0 - g) << "create must take the slot's physical memory from the device";
    std::vector<std::pair<uintptr_t, size_t>> ranges = {{reinterpret_cast<uintptr_t>(one.address), g}};
    int tag = 11;
    for (size_t n : {g - 1, g, g + 1, 2 * g + 7}) {
        xmc_slot_info info{};
        ASSERT_NE(v.create(n, &info), nullptr);
        EXPECT_EQ(info.size, (n + g - 1) / g * g) << "size " << n << " rounded to the granularity " << g;
        ASSERT_TRUE(v.write(info, ++tag)) << "access must be granted for writing";
        EXPECT_TRUE(holds(v.read(info), tag)) << "access must be granted for reading (size " << n << ")";
        for (auto [a, sz] : ranges) {
            const auto b = reinterpret_cast<uintptr_t>(info.address);
            EXPECT_TRUE(b + info.size <= a || a + sz <= b) << "slots overlap";
        }
        ranges.emplace_back(reinterpret_cast<uintptr_t>(info.address), info.size);
    }
    while (!v.slots.empty()) ASSERT_TRUE(v.ok(v.close(v.slots.back())));
    EXPECT_EQ(v.free_memory(), free0) << "closing every slot must give all their memory back";
}

TEST_P(VmmTest, VMM_CREATE_RefusesZeroBytesUnknownDeviceAndNullResult) {
    Env &v = e();
    const uint64_t free0 = v.free_memory();
    xmc_slot *s = nullptr;
    xmc_slot_info info{};
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, api->slot_create(v.inst, 0, 0, &s, &info), "slot_create"));
    EXPECT_TRUE(v.refused(XMC_ERR_NO_DEVICE, api->slot_create(v.inst, 99, 4096, &s, &info), "slot_create"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, api->slot_create(v.inst, 0, 4096, nullptr, &info), "slot_create"));
    EXPECT_EQ(s, nullptr);
    EXPECT_EQ(v.free_memory(), free0) << "a refused create took device memory";
}

// ---- VMM-STABLE -------------------------------------------------------------------

TEST_P(VmmTest, VMM_STABLE_AddressNeverMovesAcrossReleaseRemapAdopt) {
    Env &v = e();
    xmc_slot_info info{};
    xmc_slot *s = v.create(3 << 20, &info);
    ASSERT_NE(s, nullptr);
    xmc_stream *a = v.stream(), *b = v.stream();
    for (int cycle = 0; cycle < 4; ++cycle) {
        const int tag = 100 + cycle;
        void *src = v.source(info.size, tag);
        xmc_request *rel = nullptr, *rem = nullptr;
        ASSERT_TRUE(v.ok(v.release(s, a, &rel)));
        const uint32_t flags = cycle % 2 ? XMC_REMAP_DEFER_COPY : 0;
        ASSERT_TRUE(v.ok(v.remap(s, b, src, info.size, flags, &rem)));
        if (flags) {
            ASSERT_TRUE(v.ok(api->request_launch_copy(v.inst, rem, 0, b)));
        }
        ASSERT_TRUE(v.ok(v.wait(rem)));
        ASSERT_TRUE(v.ok(api->request_adopt(v.inst, rem)));
        ASSERT_TRUE(v.ok(v.destroy(rem)));
        ASSERT_TRUE(v.ok(v.destroy(rel)));
        // Read at the address create returned: a mapping made anywhere else
        // would leave this range unmapped or holding old bytes.
        EXPECT_TRUE(holds(v.read(info), tag)) << "cycle " << cycle;
        v.free_source(src);
    }
}

// ---- VMM-RELEASE-ORDER ---------------------------------------------------------------

TEST_P(VmmTest, VMM_RELEASE_ORDER_TakesEffectOnlyAfterPriorStreamWork) {
    auto own = open_env("");
    ASSERT_NE(own, nullptr);
    Env &v = *own;
    xmc_slot_info info{};
    xmc_slot *s = v.create(1, &info);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(v.write(info, 7));
    xmc_stream *a = v.stream();
    auto gate = v.gate(a);
    auto prior = v.read_async(info, a);  // prior work on the stream: it reads the slot
    const uint64_t free0 = v.free_memory();
    xmc_request *rel = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, a, &rel)));
    std::this_thread::sleep_for(kWatch);
    const xmc_request_info early = v.query(rel);
    const uint64_t free_early = v.free_memory();
    if (early.callback_fired || early.done || free_early != free0) {
        ADD_FAILURE() << "the release took effect before the stream's prior work ran (callback_fired "
                      << early.callback_fired << ", done " << early.done << ", free memory grew by "
                      << free_early - free0 << "); the queued read would now touch unmapped memory";
        return leak(own);
    }
    gate->release();
    ASSERT_TRUE(v.ok(v.wait(rel)));
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, a)));
    EXPECT_TRUE(holds(prior->bytes(), 7)) << "the work enqueued before the release must see the slot mapped";
    EXPECT_EQ(v.free_memory(), free0 + info.size) << "a completed release returns the slot's physical memory";
}

TEST_P(VmmTest, VMM_RELEASE_ORDER_ReturnsThePhysicalMemory) {
    Env &v = e();
    xmc_slot_info i1{}, i2{};
    xmc_slot *s1 = v.create(1, &i1), *s2 = v.create(3 << 20, &i2);
    ASSERT_TRUE(s1 && s2);
    const bool memfds = memfd_backed(i1.address, i1.size);  // the host and the fake back slots with memfds
    const uint64_t free0 = v.free_memory();
    xmc_request *r = nullptr;
    ASSERT_TRUE(v.ok(v.release(s1, v.io, &r)));
    ASSERT_TRUE(v.ok(v.wait(r)));
    EXPECT_EQ(v.free_memory(), free0 + i1.size) << "device free memory must grow by the slot's size";
    if (memfds) {
        EXPECT_FALSE(memfd_backed(i1.address, i1.size)) << "the released range is still backed by its memfd";
    }
    xmc_request *b = nullptr;
    xmc_request *again = nullptr;
    ASSERT_TRUE(v.ok(v.release(s2, v.io, &b)));
    ASSERT_TRUE(v.ok(v.wait(b)));
    EXPECT_EQ(v.free_memory(), free0 + i1.size + i2.size);
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release(s1, v.io, &again), "slot_release"));
    EXPECT_EQ(v.free_memory(), free0 + i1.size + i2.size) << "a refused second release changed the accounting";
}

// ---- VMM-UNMAPPED-FAULTS --------------------------------------------------------------

TEST_P(VmmTest, VMM_UNMAPPED_FAULTS_AccessWhileReleasedDiesBySignal) {
    Env &v = e();
    xmc_slot_info info{};
    xmc_slot *s = v.create(1, &info);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(v.write(info, 21));
    volatile char *p = static_cast<volatile char *>(info.address);
    const char first = pattern(21, 1)[0];
    // The control: is a mapped slot readable by the host at all (it is on
    // the host and the fakes; device memory of a real GPU is not)?
    const bool host_readable = WIFEXITED(in_child([&] { return p[0] == first ? 0 : 3; }));
    xmc_request *r = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, v.io, &r)));
    ASSERT_TRUE(v.ok(v.wait(r)));
    for (size_t off : {size_t{0}, info.size / 2, info.size - 1}) {
        const int rd = in_child([&] { return p[off] == 0 ? 1 : 2; });
        EXPECT_TRUE(died_by_fault(rd)) << "a read at offset " << off << " of the released slot did not fault ("
                                       << (WIFEXITED(rd) ? "it read memory" : "other signal") << ")";
        const int wr = in_child([&] {
            p[off] = 1;
            return 0;
        });
        EXPECT_TRUE(died_by_fault(wr)) << "a write at offset " << off << " of the released slot did not fault";
    }
    if (host_readable) {
        void *src = v.source(info.size, 22);
        xmc_request *m = nullptr;
        ASSERT_TRUE(v.ok(v.remap(s, v.io, src, info.size, 0, &m)));
        ASSERT_TRUE(v.ok(v.wait(m)));
        const char want = pattern(22, 1)[0];
        const int back = in_child([&] { return p[0] == want ? 0 : 3; });
        EXPECT_TRUE(WIFEXITED(back) && WEXITSTATUS(back) == 0) << "after the remap the range must be readable again";
    }
}

// ---- VMM-REMAP-COPY --------------------------------------------------------------------

TEST_P(VmmTest, VMM_REMAP_COPY_ContentsEqualPinnedSourceBitForBit) {
    Env &v = e();
    const uint64_t free_mapped = v.free_memory();
    Released r = released_slot(v, (2 << 20) + 1);
    ASSERT_NE(r.slot, nullptr);
    EXPECT_EQ(v.free_memory(), free_mapped) << "create then release must leave free memory as it was";
    const size_t extra = 4096;  // a source larger than the slot is fine; its head is copied
    void *src = v.source(r.info.size + extra, 31);
    xmc_request *m = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, src, r.info.size + extra, 0, &m)));
    ASSERT_TRUE(v.ok(v.wait(m)));
    EXPECT_TRUE(holds(v.read(r.info), 31));
    EXPECT_EQ(v.free_memory(), free_mapped - r.info.size) << "the remap maps fresh physical memory";
}

TEST_P(VmmTest, VMM_REMAP_COPY_RefusesInvalidSourceAndChangesNothing) {
    Env &v = e();
    Released r = released_slot(v, 1);
    ASSERT_NE(r.slot, nullptr);
    const size_t n = r.info.size, page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    char *big = static_cast<char *>(v.source(n + page, 41));
    void *small = v.source(n / 2, 42);
    std::vector<char> heap(n + page, 1);  // never pinned
    const uint64_t free0 = v.free_memory();
    struct Case {
        const char *what;
        const void *src;
        size_t bytes;
        uint32_t flags;
        xmc_status want;
    } cases[] = {
        {"NULL source", nullptr, n, 0, XMC_ERR_INVALID_ARGUMENT},
        {"source shorter than the slot", big, n - 1, 0, XMC_ERR_INVALID_ARGUMENT},
        {"unpinned memory", heap.data(), n, 0, XMC_ERR_NOT_PINNED_BASE},
        {"inside a pinned block, not at its base", big + page, n, 0, XMC_ERR_NOT_PINNED_BASE},
        {"pinned block smaller than the length given", small, n, 0, XMC_ERR_NOT_PINNED_BASE},
        {"unknown flag", big, n, 0x80, XMC_ERR_INVALID_ARGUMENT},
    };
    for (const Case &c : cases) {
        xmc_request *m = reinterpret_cast<xmc_request *>(0x1);
        EXPECT_TRUE(v.refused(c.want, v.remap(r.slot, v.io, c.src, c.bytes, c.flags, &m), "slot_remap")) << c.what;
        EXPECT_EQ(m, reinterpret_cast<xmc_request *>(0x1)) << c.what << ": a refused remap returned a request";
        EXPECT_EQ(v.free_memory(), free0) << c.what << ": a refused remap mapped memory";
    }
    // Nothing changed: the slot is still released, so a valid remap is accepted.
    xmc_request *m = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, big, n + page, 0, &m)));
    ASSERT_TRUE(v.ok(v.wait(m)));
    EXPECT_TRUE(holds(v.read(r.info), 41));
}

TEST_P(VmmTest, VMM_REMAP_COPY_BatchWithOneInvalidSourceChangesNothing) {
    Env &v = e();
    Released a = released_slot(v, 1), b = released_slot(v, 1);
    ASSERT_TRUE(a.slot && b.slot);
    void *good = v.source(a.info.size, 51);
    std::vector<char> heap(b.info.size, 2);
    const uint64_t free0 = v.free_memory();
    xmc_request *m = nullptr;
    EXPECT_TRUE(v.refused(XMC_ERR_NOT_PINNED_BASE,
                          v.remap_batch({a.slot, b.slot}, v.io, {good, heap.data()}, {a.info.size, b.info.size}, 0, &m),
                          "slot_remap_batch"));
    EXPECT_EQ(v.free_memory(), free0) << "the valid half of a refused batch was mapped";
    void *good_b = v.source(b.info.size, 52);
    ASSERT_TRUE(v.ok(v.remap_batch({a.slot, b.slot}, v.io, {good, good_b}, {a.info.size, b.info.size}, 0, &m)));
    ASSERT_TRUE(v.ok(v.wait(m)));
    EXPECT_TRUE(holds(v.read(a.info), 51));
    EXPECT_TRUE(holds(v.read(b.info), 52));
}

// ---- VMM-DEFERRED -----------------------------------------------------------------------

TEST_P(VmmTest, VMM_DEFERRED_CopyLaunchesOncePerSlot) {
    Env &v = e();
    Released a = released_slot(v, 1), b = released_slot(v, 1);
    ASSERT_TRUE(a.slot && b.slot);
    void *sa = v.source(a.info.size, 61), *sb = v.source(b.info.size, 62);
    xmc_request *m = nullptr;
    ASSERT_TRUE(v.ok(v.remap_batch({a.slot, b.slot}, v.io, {sa, sb}, {a.info.size, b.info.size},
                                   XMC_REMAP_DEFER_COPY, &m)));
    ASSERT_TRUE(v.ok(v.wait(m)));
    EXPECT_EQ(v.query(m).copies_launched, 0u) << "a deferred remap started a copy by itself";
    EXPECT_NE(mismatch(v.read(a.info), 61), SIZE_MAX) << "the deferred copy ran before it was launched";
    xmc_stream *s = v.stream();
    ASSERT_TRUE(v.ok(api->request_launch_copy(v.inst, m, 0, s)));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, api->request_launch_copy(v.inst, m, 0, s), "request_launch_copy"))
        << "a second launch for one slot must be refused";
    EXPECT_EQ(v.query(m).copies_launched, 1u);
    ASSERT_TRUE(v.ok(api->request_launch_copy(v.inst, m, 1, v.io)));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, api->request_launch_copy(v.inst, m, 1, s), "request_launch_copy"));
    ASSERT_TRUE(v.ok(v.wait(m)));
    EXPECT_EQ(v.query(m).copies_launched, 2u);
    EXPECT_TRUE(holds(v.read(a.info), 61));
    EXPECT_TRUE(holds(v.read(b.info), 62));
}

TEST_P(VmmTest, VMM_DEFERRED_LaunchWaitsForTheRemap) {
    auto own = open_env("");
    ASSERT_NE(own, nullptr);
    Env &v = *own;
    xmc_slot_info info{};
    xmc_slot *s = v.create(1, &info);
    ASSERT_NE(s, nullptr);
    void *src = v.source(info.size, 71);
    xmc_stream *g = v.stream(), *b = v.stream();
    auto gate = v.gate(g);
    xmc_request *rel = nullptr, *m = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, g, &rel)));  // held: the remap cannot map until the gate opens
    ASSERT_TRUE(v.ok(v.remap(s, b, src, info.size, XMC_REMAP_DEFER_COPY, &m)));
    std::atomic<bool> returned{false};
    std::atomic<int> done_at_return{-1};
    xmc_status launched = XMC_OK;
    std::thread t([&] {
        launched = api->request_launch_copy(v.inst, m, 0, b);
        xmc_request_info i{};
        api->request_query(v.inst, m, &i);
        done_at_return = i.done;
        returned = true;
    });
    std::this_thread::sleep_for(kWatch);
    if (returned && done_at_return != 1) {
        ADD_FAILURE() << "request_launch_copy returned (" << xmc_status_string(launched)
                      << ") before the remap finished: the copy would land in unmapped memory";
        t.join();
        return leak(own);
    }
    gate->release();
    t.join();
    EXPECT_EQ(done_at_return, 1) << "the launch returned before the remap had finished";
    ASSERT_TRUE(v.ok(launched));
    ASSERT_TRUE(v.ok(v.wait(m)));
    EXPECT_TRUE(holds(v.read(info), 71));
}

TEST_P(VmmTest, VMM_DEFERRED_RefusesLaunchOfNonDeferredReleaseOrOutOfRange) {
    Env &v = e();
    Released r = released_slot(v, 1);
    ASSERT_NE(r.slot, nullptr);
    void *src = v.source(r.info.size, 81);
    xmc_request *m = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, src, r.info.size, 0, &m)));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, api->request_launch_copy(v.inst, m, 0, v.io),
                          "request_launch_copy"))
        << "a remap that copies by itself has no copy to launch";
    ASSERT_TRUE(v.ok(v.wait(m)));
    ASSERT_TRUE(v.ok(api->request_adopt(v.inst, m)));
    xmc_request *rel = nullptr, *d = nullptr;
    ASSERT_TRUE(v.ok(v.release(r.slot, v.io, &rel)));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, api->request_launch_copy(v.inst, rel, 0, v.io),
                          "request_launch_copy"));
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, src, r.info.size, XMC_REMAP_DEFER_COPY, &d)));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, api->request_launch_copy(v.inst, d, 1, v.io),
                          "request_launch_copy"))
        << "slot index 1 of a one-slot request";
    ASSERT_TRUE(v.ok(v.wait(d)));
    EXPECT_EQ(v.query(d).copies_launched, 0u);
    ASSERT_TRUE(v.ok(v.destroy(d)));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, api->request_launch_copy(v.inst, d, 0, v.io),
                          "request_launch_copy"));
}

// ---- VMM-STATE ---------------------------------------------------------------------------

TEST_P(VmmTest, VMM_STATE_ReleaseWithReleasePendingIsBusy) {
    auto own = open_env("");
    ASSERT_NE(own, nullptr);
    Env &v = *own;
    xmc_slot_info info{};
    xmc_slot *s = v.create(1, &info);
    ASSERT_NE(s, nullptr);
    const uint64_t free0 = v.free_memory();
    xmc_stream *g = v.stream();
    auto gate = v.gate(g);
    xmc_request *rel = nullptr, *again = reinterpret_cast<xmc_request *>(0x1);
    ASSERT_TRUE(v.ok(v.release(s, g, &rel)));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release(s, v.io, &again), "slot_release")) << "while pending";
    EXPECT_EQ(again, reinterpret_cast<xmc_request *>(0x1));
    gate->release();
    ASSERT_TRUE(v.ok(v.wait(rel)));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release(s, v.io, &again), "slot_release")) << "once released";
    EXPECT_EQ(v.free_memory(), free0 + info.size) << "the memory must be returned once, by the first release";
}

TEST_P(VmmTest, VMM_STATE_RemapOfMappedSlotWithoutReleaseIsBusy) {
    Env &v = e();
    xmc_slot_info info{};
    xmc_slot *s = v.create(1, &info);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(v.write(info, 91));
    void *src = v.source(info.size, 92);
    const uint64_t free0 = v.free_memory();
    xmc_request *m = nullptr;
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.remap(s, v.io, src, info.size, 0, &m), "slot_remap"));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.remap_batch({s}, v.io, {src}, {info.size}, 0, &m), "slot_remap_batch"));
    EXPECT_TRUE(holds(v.read(info), 91)) << "a refused remap changed the slot's bytes";
    EXPECT_EQ(v.free_memory(), free0);
}

TEST_P(VmmTest, VMM_STATE_RemapOrReleaseWithRemapPendingIsBusy) {
    Env &v = e();
    Released r = released_slot(v, 1);
    ASSERT_NE(r.slot, nullptr);
    void *first = v.source(r.info.size, 93), *second = v.source(r.info.size, 94);
    xmc_request *m = nullptr, *refused = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, first, r.info.size, XMC_REMAP_DEFER_COPY, &m)));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.remap(r.slot, v.io, second, r.info.size, 0, &refused), "slot_remap"));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release(r.slot, v.io, &refused), "slot_release"));
    ASSERT_TRUE(v.ok(v.wait(m)));
    // Still pending (until adopted): the refusals hold after the worker is done.
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.remap(r.slot, v.io, second, r.info.size, 0, &refused), "slot_remap"));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release(r.slot, v.io, &refused), "slot_release"));
    ASSERT_TRUE(v.ok(api->request_launch_copy(v.inst, m, 0, v.io)));
    ASSERT_TRUE(v.ok(v.wait(m)));
    EXPECT_TRUE(holds(v.read(r.info), 93)) << "the pending remap must finish with its own source";
}

// ---- VMM-BATCH ------------------------------------------------------------------------------

TEST_P(VmmTest, VMM_BATCH_RefusesSlotNamedTwice) {
    Env &v = e();
    xmc_slot_info ia{}, ib{};
    xmc_slot *a = v.create(1, &ia), *b = v.create(1, &ib);
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(v.write(ia, 101) && v.write(ib, 102));
    const uint64_t free0 = v.free_memory();
    xmc_request *r = nullptr;
    // Accepted, the batch releases the slots: reading them below would fault.
    ASSERT_TRUE(v.refused(XMC_ERR_DUPLICATE_IN_BATCH, v.release_batch({a, b, a}, v.io, &r), "slot_release_batch"));
    ASSERT_TRUE(v.refused(XMC_ERR_DUPLICATE_IN_BATCH, v.release_batch({b, b}, v.io, &r), "slot_release_batch"));
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, v.io)));
    EXPECT_EQ(v.free_memory(), free0) << "a refused batch released a slot";
    EXPECT_TRUE(holds(v.read(ia), 101));
    EXPECT_TRUE(holds(v.read(ib), 102));
    // Both still mapped and not pending: the batch without the duplicate is accepted.
    ASSERT_TRUE(v.ok(v.release_batch({a, b}, v.io, &r)));
    ASSERT_TRUE(v.ok(v.wait(r)));
    EXPECT_EQ(v.free_memory(), free0 + ia.size + ib.size);
    void *sa = v.source(ia.size, 103), *sb = v.source(ib.size, 104);
    EXPECT_TRUE(v.refused(XMC_ERR_DUPLICATE_IN_BATCH,
                          v.remap_batch({a, b, b}, v.io, {sa, sb, sb}, {ia.size, ib.size, ib.size}, 0, &r),
                          "slot_remap_batch"));
    EXPECT_EQ(v.free_memory(), free0 + ia.size + ib.size) << "a refused batch remapped a slot";
    ASSERT_TRUE(v.ok(v.remap_batch({a, b}, v.io, {sa, sb}, {ia.size, ib.size}, 0, &r)));
    ASSERT_TRUE(v.ok(v.wait(r)));
    EXPECT_TRUE(holds(v.read(ia), 103));
    EXPECT_TRUE(holds(v.read(ib), 104));
}

TEST_P(VmmTest, VMM_BATCH_RefusesWholeBatchWhenOneSlotIsBusy) {
    Env &v = e();
    xmc_slot_info ia{};
    xmc_slot *a = v.create(1, &ia);
    Released b = released_slot(v, 1);
    ASSERT_TRUE(a && b.slot);
    ASSERT_TRUE(v.write(ia, 111));
    const uint64_t free0 = v.free_memory();
    xmc_request *r = nullptr;
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release_batch({a, b.slot}, v.io, &r), "slot_release_batch"));
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, v.io)));
    EXPECT_EQ(v.free_memory(), free0) << "the mapped slot of a refused batch was released";
    EXPECT_TRUE(holds(v.read(ia), 111));
    ASSERT_TRUE(v.ok(v.release(a, v.io, &r))) << "the mapped slot must still be releasable";
    ASSERT_TRUE(v.ok(v.wait(r)));
}

TEST_P(VmmTest, VMM_BATCH_RefusesEmptyBatch) {
    Env &v = e();
    xmc_request *r = nullptr;
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, api->slot_release_batch(v.inst, nullptr, 0, v.io, &r),
                          "slot_release_batch"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT,
                          api->slot_remap_batch(v.inst, nullptr, 0, v.io, nullptr, nullptr, 0, &r),
                          "slot_remap_batch"));
}

TEST_P(VmmTest, VMM_BATCH_ReleasesAndRemapsEverySlot) {
    Env &v = e();
    std::vector<xmc_slot *> s(3);
    std::vector<xmc_slot_info> info(3);
    for (int i = 0; i < 3; ++i) ASSERT_NE(s[i] = v.create(size_t(i + 1) << 20, &info[i]), nullptr);
    const uint64_t free0 = v.free_memory();
    xmc_request *r = nullptr;
    ASSERT_TRUE(v.ok(v.release_batch(s, v.io, &r)));
    ASSERT_TRUE(v.ok(v.wait(r)));
    EXPECT_EQ(v.query(r).slots, 3u);
    EXPECT_EQ(v.free_memory(), free0 + info[0].size + info[1].size + info[2].size);
    std::vector<const void *> src;
    std::vector<size_t> n;
    for (int i = 0; i < 3; ++i) {
        src.push_back(v.source(info[i].size, 120 + i));
        n.push_back(info[i].size);
    }
    ASSERT_TRUE(v.ok(v.remap_batch(s, v.io, src, n, 0, &r)));
    ASSERT_TRUE(v.ok(v.wait(r)));
    EXPECT_EQ(v.query(r).copies_launched, 3u);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(holds(v.read(info[i]), 120 + i)) << "slot " << i;
}

// ---- VMM-CLOSE ---------------------------------------------------------------------------------

TEST_P(VmmTest, VMM_CLOSE_WaitsForAnInFlightCopy) {
    auto own = open_env("");
    ASSERT_NE(own, nullptr);
    Env &v = *own;
    Released r = released_slot(v, 1);
    ASSERT_NE(r.slot, nullptr);
    void *src = v.source(r.info.size, 131);
    const uint64_t free_released = v.free_memory();
    xmc_request *m = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, src, r.info.size, XMC_REMAP_DEFER_COPY, &m)));
    ASSERT_TRUE(v.ok(v.wait(m)));
    xmc_stream *l = v.stream();
    auto gate = v.gate(l);
    ASSERT_TRUE(v.ok(api->request_launch_copy(v.inst, m, 0, l)));  // queued behind the gate
    std::atomic<bool> returned{false};
    xmc_status closed = XMC_OK;
    std::thread t([&] {
        closed = api->slot_close(v.inst, r.slot);
        returned = true;
    });
    std::this_thread::sleep_for(kWatch);
    if (returned) {
        ADD_FAILURE() << "slot_close returned (" << xmc_status_string(closed)
                      << ") while a copy into the slot was still queued: the copy would write into unmapped memory";
        t.join();
        return leak(own);
    }
    gate->release();
    t.join();
    ASSERT_TRUE(v.ok(closed));
    v.slots.clear();
    ASSERT_TRUE(v.ok(v.wait(m)));
    EXPECT_EQ(v.query(m).copies_launched, 1u);
    EXPECT_EQ(v.free_memory(), free_released) << "close must give the slot's memory back";
}

TEST_P(VmmTest, VMM_CLOSE_WaitsForAPendingRelease) {
    auto own = open_env("");
    ASSERT_NE(own, nullptr);
    Env &v = *own;
    xmc_slot_info info{};
    xmc_slot *s = v.create(1, &info);
    ASSERT_NE(s, nullptr);
    const uint64_t free0 = v.free_memory();
    xmc_stream *g = v.stream();
    auto gate = v.gate(g);
    xmc_request *rel = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, g, &rel)));
    std::atomic<bool> returned{false};
    std::atomic<int> release_done{-1};
    xmc_status closed = XMC_OK;
    std::thread t([&] {
        closed = api->slot_close(v.inst, s);
        xmc_request_info i{};
        api->request_query(v.inst, rel, &i);
        release_done = i.done;
        returned = true;
    });
    std::this_thread::sleep_for(kWatch);
    gate->release();
    t.join();
    ASSERT_TRUE(v.ok(closed));
    v.slots.clear();
    EXPECT_EQ(release_done, 1) << "slot_close returned while the slot's release was still pending";
    ASSERT_TRUE(v.ok(v.wait(rel)));
    EXPECT_EQ(v.free_memory(), free0 + info.size);
}

TEST_P(VmmTest, VMM_CLOSE_ClosedSlotIsRefusedEverywhere) {
    Env &v = e();
    const uint64_t free0 = v.free_memory();
    xmc_slot_info info{};
    xmc_slot *s = v.create(1, &info);
    ASSERT_NE(s, nullptr);
    void *src = v.source(info.size, 141);
    ASSERT_TRUE(v.ok(v.close(s)));
    EXPECT_EQ(v.free_memory(), free0);
    xmc_request *r = nullptr;
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, api->slot_close(v.inst, s), "slot_close"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, v.release(s, v.io, &r), "slot_release"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, v.remap(s, v.io, src, info.size, 0, &r), "slot_remap"));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, v.release_batch({s}, v.io, &r), "slot_release_batch"));
    EXPECT_EQ(v.free_memory(), free0);
}

// ---- VMM-ADOPT -------------------------------------------------------------------------------------

TEST_P(VmmTest, VMM_ADOPT_DestroyingTheRequestKeepsAnAdoptedMapping) {
    Env &v = e();
    Released r = released_slot(v, 1);
    ASSERT_NE(r.slot, nullptr);
    void *src = v.source(r.info.size, 151);
    xmc_request *m = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, src, r.info.size, 0, &m)));
    ASSERT_TRUE(v.ok(api->request_adopt(v.inst, m)));
    EXPECT_EQ(v.query(m).adopted, 1u);
    ASSERT_TRUE(v.ok(v.wait(m)));
    const uint64_t free_mapped = v.free_memory();
    ASSERT_TRUE(v.ok(v.destroy(m)));
    EXPECT_EQ(v.free_memory(), free_mapped) << "destroying the request unmapped the adopted mapping";
    EXPECT_TRUE(holds(v.read(r.info), 151));
    xmc_request *rel = nullptr;
    ASSERT_TRUE(v.ok(v.release(r.slot, v.io, &rel))) << "an adopted slot is mapped and releasable";
    ASSERT_TRUE(v.ok(v.wait(rel)));
}

TEST_P(VmmTest, VMM_ADOPT_DestroyingAnUnadoptedRequestRollsBackItsMapping) {
    Env &v = e();
    Released r = released_slot(v, 1);
    ASSERT_NE(r.slot, nullptr);
    void *src = v.source(r.info.size, 161);
    const uint64_t free_released = v.free_memory();
    xmc_request *m = nullptr, *x = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, src, r.info.size, 0, &m)));
    ASSERT_TRUE(v.ok(v.wait(m)));
    ASSERT_TRUE(v.ok(v.destroy(m)));
    EXPECT_EQ(v.free_memory(), free_released) << "a mapping never adopted belongs to its request and goes with it";
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, v.release(r.slot, v.io, &x), "slot_release")) << "the slot must be released";
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, src, r.info.size, 0, &x)));
    ASSERT_TRUE(v.ok(v.wait(x)));
    EXPECT_TRUE(holds(v.read(r.info), 161));
}

TEST_P(VmmTest, VMM_ADOPT_RefusesSecondAdoptAndReleaseRequests) {
    Env &v = e();
    Released r = released_slot(v, 1);
    ASSERT_NE(r.slot, nullptr);
    void *src = v.source(r.info.size, 171);
    xmc_request *m = nullptr, *rel = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, src, r.info.size, 0, &m)));
    ASSERT_TRUE(v.ok(api->request_adopt(v.inst, m)));
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, api->request_adopt(v.inst, m), "request_adopt"));
    ASSERT_TRUE(v.ok(v.wait(m)));
    ASSERT_TRUE(v.ok(v.release(r.slot, v.io, &rel)));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, api->request_adopt(v.inst, rel), "request_adopt"));
    ASSERT_TRUE(v.ok(v.destroy(m)));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, api->request_adopt(v.inst, m), "request_adopt"));
}

// ---- VMM-SERIAL -----------------------------------------------------------------------------------

TEST_P(VmmTest, VMM_SERIAL_RemapWaitingOnALaterReleaseCompletes) {
    auto own = open_env("vmm_workers=1");
    ASSERT_NE(own, nullptr);
    Env &v = *own;
    xmc_slot_info ia{}, ic{};
    xmc_slot *a = v.create(1, &ia), *c = v.create(1, &ic);
    ASSERT_TRUE(a && c);
    void *src = v.source(ia.size, 181);
    xmc_stream *g = v.stream(), *b = v.stream(), *d = v.stream();
    auto gate = v.gate(g);
    xmc_request *rel_a = nullptr, *rem_a = nullptr, *rel_c = nullptr;
    ASSERT_TRUE(v.ok(v.release(a, g, &rel_a)));  // queued to the worker only when the gate opens
    ASSERT_TRUE(v.ok(v.remap(a, b, src, ia.size, 0, &rem_a)));
    // The remap reaches the one worker first, and must not hold it.
    EXPECT_TRUE(eventually([&] { return v.query(rem_a).callback_fired == 1; }, 2000ms))
        << "the remap's stream never reached it";
    ASSERT_TRUE(v.ok(v.release(c, d, &rel_c)));
    if (xmc_status st = v.wait(rel_c, 3000); st != XMC_OK) {
        ADD_FAILURE() << "serial mode: an unrelated release did not complete while a remap waited for its own "
                         "release (" << xmc_status_string(st) << "): the one worker is held by the waiting remap";
        return leak(own);
    }
    gate->release();
    if (xmc_status st = v.wait(rem_a, 5000); st != XMC_OK) {
        ADD_FAILURE() << "serial mode: the remap did not complete within 5 s of its release being queued ("
                      << xmc_status_string(st) << " " << v.error() << "): deadlock on the one worker";
        return leak(own);
    }
    EXPECT_TRUE(holds(v.read(ia), 181));
}

// ---- VMM-ASYNC-ERROR --------------------------------------------------------------------------------

// The asynchronous failure of `r`: reported by wait (with the driver's code,
// naming the call) and by query, identically.
void expect_async_failure(Env &v, xmc_request *r, const FaultHook &h) {
    const xmc_status st = v.wait(r);
    EXPECT_NE(st, XMC_OK) << "the injected driver failure was not reported";
    EXPECT_NE(st, XMC_ERR_TIMEOUT);
    xmc_error_info e{};
    v.api->last_error(v.inst, &e);
    EXPECT_EQ(e.native_code, h.code) << "the failure must carry the driver's code; " << v.error();
    EXPECT_STREQ(e.call, "request_wait");
    const xmc_request_info i = v.query(r);
    EXPECT_EQ(i.done, 1);
    EXPECT_EQ(i.status, st) << "query and wait disagree on the request's outcome";
    EXPECT_EQ(i.native_code, h.code);
}

// Checks the backend's slot against what the model says after the failure.
void expect_model_state(Env &v, const SlotModel &m, int slot, xmc_slot *s, const xmc_slot_info &info) {
    xmc_request *probe = nullptr;
    const SlotState st = m.slots()[slot].state;
    if (st == SlotState::Mapped) {
        if (m.slots()[slot].content != kNoTag) {
            EXPECT_TRUE(holds(v.read(info), m.slots()[slot].content));
        }
        EXPECT_TRUE(v.ok(v.release(s, v.io, &probe))) << "the model says the slot is mapped";
    } else if (st == SlotState::Released || st == SlotState::ReleasePending) {
        void *src = v.source(info.size, 999);
        EXPECT_TRUE(v.ok(v.remap(s, v.io, src, info.size, 0, &probe))) << "the model says the slot is released";
        if (probe) {
            EXPECT_TRUE(v.ok(v.wait(probe))) << "a remap after the failure must work (the fault is spent)";
            EXPECT_TRUE(holds(v.read(info), 999));
        }
    }
    if (probe) v.wait(probe);
}

TEST_P(VmmTest, VMM_ASYNC_ERROR_FailedReleaseLeavesSlotMappedWithItsBytes) {
    const FaultHook h = fault_hook(api, true, 1);
    if (!h.why.empty()) XMC_SKIP(SkipKind::Unsupported, h.why);
    auto own = open_env(h.options);
    ASSERT_NE(own, nullptr);
    Env &v = *own;
    SlotModel m;
    xmc_slot_info info{};
    xmc_slot *s = v.create(1, &info);
    ASSERT_EQ(m.create(1), XMC_OK);
    ASSERT_TRUE(v.write(info, 191));
    m.write(0, 191);
    const uint64_t free0 = v.free_memory();
    h.arm();
    xmc_request *r = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, v.io, &r)));
    ASSERT_EQ(m.release({0}), XMC_OK);
    expect_async_failure(v, r, h);
    h.disarm();
    m.fail(0, 0);
    ASSERT_EQ(m.slots()[0].state, SlotState::Mapped);
    EXPECT_EQ(v.free_memory(), free0) << "a failed release returned memory it still maps";
    expect_model_state(v, m, 0, s, info);
}

TEST_P(VmmTest, VMM_ASYNC_ERROR_FailedRemapRollsBackToReleased) {
    const FaultHook h = fault_hook(api, false, 1);
    if (!h.why.empty()) XMC_SKIP(SkipKind::Unsupported, h.why);
    auto own = open_env(h.options);
    ASSERT_NE(own, nullptr);
    Env &v = *own;
    SlotModel m;
    Released r = released_slot(v, 1);
    ASSERT_NE(r.slot, nullptr);
    m.create(1);
    m.release({0});
    m.wait(0);
    void *src = v.source(r.info.size, 201);
    const uint64_t free_released = v.free_memory();
    h.arm();
    xmc_request *q = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, src, r.info.size, 0, &q)));
    ASSERT_EQ(m.remap({0}, {Source::Valid}, {201}, 0), XMC_OK);
    expect_async_failure(v, q, h);
    h.disarm();
    m.fail(1, 0);
    EXPECT_EQ(v.free_memory(), free_released) << "the failed remap's mapping was not rolled back";
    EXPECT_TRUE(v.refused(XMC_ERR_BUSY, api->request_adopt(v.inst, q), "request_adopt"))
        << "a failed remap has nothing to adopt";
    ASSERT_EQ(m.slots()[0].state, SlotState::Released);
    expect_model_state(v, m, 0, r.slot, r.info);
}

TEST_P(VmmTest, VMM_ASYNC_ERROR_FailedBatchRemapRollsBackEverySlot) {
    const FaultHook h = fault_hook(api, false, 2);
    if (!h.why.empty()) XMC_SKIP(SkipKind::Unsupported, h.why);
    auto own = open_env(h.options);
    ASSERT_NE(own, nullptr);
    Env &v = *own;
    SlotModel m;
    Released a = released_slot(v, 1), b = released_slot(v, 1);
    ASSERT_TRUE(a.slot && b.slot);
    for (int i = 0; i < 2; ++i) {
        m.create(1);
        m.release({i});
        m.wait(i);
    }
    void *sa = v.source(a.info.size, 211), *sb = v.source(b.info.size, 212);
    const uint64_t free_released = v.free_memory();
    h.arm();
    xmc_request *q = nullptr;
    ASSERT_TRUE(v.ok(v.remap_batch({a.slot, b.slot}, v.io, {sa, sb}, {a.info.size, b.info.size}, 0, &q)));
    ASSERT_EQ(m.remap({0, 1}, {Source::Valid, Source::Valid}, {211, 212}, 0), XMC_OK);
    expect_async_failure(v, q, h);  // the second slot's map failed
    h.disarm();
    m.fail(2, 1);
    EXPECT_EQ(v.free_memory(), free_released) << "the first slot's mapping outlived its failed request";
    EXPECT_EQ(v.query(q).copies_launched, 0u) << "a copy was started into a rolled-back mapping";
    expect_model_state(v, m, 0, a.slot, a.info);
    expect_model_state(v, m, 1, b.slot, b.info);
}

TEST_P(VmmTest, VMM_ASYNC_ERROR_RemapAfterAFailedReleaseFailsAndKeepsTheMapping) {
    const FaultHook h = fault_hook(api, true, 1);
    if (!h.why.empty()) XMC_SKIP(SkipKind::Unsupported, h.why);
    auto own = open_env(h.options);
    ASSERT_NE(own, nullptr);
    Env &v = *own;
    SlotModel m;
    xmc_slot_info info{};
    xmc_slot *s = v.create(1, &info);
    ASSERT_TRUE(s && m.create(1) == XMC_OK);
    ASSERT_TRUE(v.write(info, 221));
    m.write(0, 221);
    void *src = v.source(info.size, 222);
    const uint64_t free0 = v.free_memory();
    xmc_stream *g = v.stream();
    auto gate = v.gate(g);
    h.arm();
    xmc_request *rel = nullptr, *rem = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, g, &rel)));
    m.release({0});
    const xmc_status remapped = v.remap(s, v.io, src, info.size, 0, &rem);
    gate->release();
    if (remapped != XMC_OK) {
        // Only if the release already ran, out of its stream's order:
        // VMM-RELEASE-ORDER's to report; the failure itself is checked below.
        EXPECT_EQ(v.query(rel).done, 1) << "remap refused while the release was pending: " << v.error();
    } else {
        m.remap({0}, {Source::Valid}, {222}, 0);
        expect_async_failure(v, rem, h);
    }
    expect_async_failure(v, rel, h);
    h.disarm();
    m.fail(0, 0);
    ASSERT_EQ(m.slots()[0].state, SlotState::Mapped);
    EXPECT_EQ(v.free_memory(), free0) << "memory accounting moved although the slot was never unmapped";
    expect_model_state(v, m, 0, s, info);
}

// ---- VMM-CALLBACK ------------------------------------------------------------------------------------

TEST_P(VmmTest, VMM_CALLBACK_StreamIsNeverHeldBySlotWork) {
    auto own = open_env("");
    ASSERT_NE(own, nullptr);
    Env &v = *own;
    xmc_slot_info ia{}, ib{}, ic{};
    xmc_slot *a = v.create(1, &ia), *bslot = v.create(1, &ib), *probe = v.create(1, &ic);
    ASSERT_TRUE(a && bslot && probe);
    void *src = v.source(ia.size, 231), *src_b = v.source(ib.size, 232);
    xmc_stream *g = v.stream(), *b = v.stream();
    auto gate = v.gate(g);
    xmc_request *rel = nullptr, *rem = nullptr, *after = nullptr;
    ASSERT_TRUE(v.ok(v.release(a, g, &rel)));
    ASSERT_TRUE(v.ok(v.remap(a, b, src, ia.size, 0, &rem)));
    ASSERT_TRUE(v.ok(v.release(probe, b, &after)));  // b's next work: a release of another slot
    // The remap cannot run before its release, held by the gate. A backend
    // that only notes the remap's place on b lets b move on, and the release
    // after it completes; one whose stream callback does the work (driver
    // calls, and the wait for the release) itself holds b until the gate opens.
    EXPECT_TRUE(v.ok(v.wait(after, 2000)))
        << "the stream did not get past the remap while the remap waited for its release: the "
           "stream's callback does the slot work itself instead of handing it to a worker";
    gate->release();
    ASSERT_TRUE(v.ok(v.wait(rem))) << "(a driver that refuses calls from callback threads fails them here)";
    ASSERT_TRUE(v.ok(v.wait(rel)));
    EXPECT_TRUE(holds(v.read(ia), 231));
    ASSERT_TRUE(v.ok(api->request_adopt(v.inst, rem)));
    // A batch and a deferred copy through callbacks too: none may fail.
    xmc_request *r2 = nullptr, *r3 = nullptr;
    ASSERT_TRUE(v.ok(v.release_batch({a, bslot}, b, &r2)));
    ASSERT_TRUE(v.ok(v.remap_batch({a, bslot}, b, {src, src_b}, {ia.size, ib.size}, XMC_REMAP_DEFER_COPY, &r3)));
    ASSERT_TRUE(v.ok(api->request_launch_copy(v.inst, r3, 1, g)));
    ASSERT_TRUE(v.ok(v.wait(r3)));
    ASSERT_TRUE(v.ok(v.wait(r2)));
    EXPECT_TRUE(holds(v.read(ib), 232));
}

// ---- VMM-EVENT-WAIT ------------------------------------------------------------------------------------

TEST_P(VmmTest, VMM_EVENT_WAIT_ConsumerToldBeforeTheCopyExistsWaitsForIt) {
    auto own = open_env("");
    ASSERT_NE(own, nullptr);
    Env &v = *own;
    xmc_slot_info info{};
    xmc_slot *s = v.create(1, &info);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(v.write(info, 241));
    void *src = v.source(info.size, 242);
    xmc_stream *g = v.stream(), *b = v.stream(), *c = v.stream();
    auto gate = v.gate(g);
    xmc_request *rel = nullptr, *rem = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, g, &rel)));
    ASSERT_TRUE(v.ok(v.remap(s, b, src, info.size, 0, &rem)));
    // Told now, before any worker has started (let alone recorded) the copy.
    ASSERT_TRUE(v.ok(api->request_stream_wait(v.inst, rem, c)));
    auto seen = v.read_async(info, c);  // the consumer reads the slot
    std::this_thread::sleep_for(kWatch / 3);
    gate->release();
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, c)));
    ASSERT_TRUE(v.ok(v.wait(rem)));
    EXPECT_TRUE(holds(seen->bytes(), 242)) << "the consumer stream read the slot before the reload copy finished";
}

TEST_P(VmmTest, VMM_EVENT_WAIT_ConsumerWaitsForALaunchedDeferredCopy) {
    auto own = open_env("");
    ASSERT_NE(own, nullptr);
    Env &v = *own;
    Released r = released_slot(v, 1);
    ASSERT_NE(r.slot, nullptr);
    void *src = v.source(r.info.size, 251);
    xmc_request *m = nullptr;
    ASSERT_TRUE(v.ok(v.remap(r.slot, v.io, src, r.info.size, XMC_REMAP_DEFER_COPY, &m)));
    ASSERT_TRUE(v.ok(v.wait(m)));
    ASSERT_TRUE(v.write(r.info, 252));
    xmc_stream *l = v.stream(), *c = v.stream();
    auto gate = v.gate(l);
    ASSERT_TRUE(v.ok(api->request_launch_copy(v.inst, m, 0, l)));  // queued behind the gate
    ASSERT_TRUE(v.ok(api->request_stream_wait(v.inst, m, c)));
    auto seen = v.read_async(r.info, c);
    std::this_thread::sleep_for(kWatch / 3);
    gate->release();
    ASSERT_TRUE(v.ok(api->stream_synchronize(v.inst, c)));
    EXPECT_TRUE(holds(seen->bytes(), 251)) << "the consumer read the slot before the launched copy finished";
}

TEST_P(VmmTest, VMM_EVENT_WAIT_RefusesReleaseRequestAndStaleHandle) {
    Env &v = e();
    xmc_slot_info info{};
    xmc_slot *s = v.create(1, &info);
    ASSERT_NE(s, nullptr);
    xmc_request *rel = nullptr;
    ASSERT_TRUE(v.ok(v.release(s, v.io, &rel)));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_ARGUMENT, api->request_stream_wait(v.inst, rel, v.io),
                          "request_stream_wait"));
    ASSERT_TRUE(v.ok(v.destroy(rel)));
    EXPECT_TRUE(v.refused(XMC_ERR_INVALID_HANDLE, api->request_stream_wait(v.inst, rel, v.io),
                          "request_stream_wait"));
}

// ---- stateful sequences against the slot model ------------------------------------------

// What a mix of commands may do besides valid calls (each requirement's
// property draws the refusals of that requirement only). Set by the property
// before it runs; each command keeps the mix it was generated under.
enum : unsigned { kBusy = 1, kDup = 2, kRelaunch = 4, kCloseAny = 8, kBadSource = 16, kOneStream = 32 };
thread_local unsigned t_mix = 0;

// A backend that left a request unfinished past kWaitMs is stuck: its
// instance is left behind, and later sequences on it fail at once with the
// first one's story instead of each waiting (and shrinking) through it.
std::map<std::string, std::string> g_stuck;  // backend -> what got stuck


// The system under test: an instance, two streams for requests and one for a
// consumer, and the real handle of each slot and request the model names.
struct VmmSut {
    std::string backend;
    std::unique_ptr<Env> env;
    xmc_stream *on[2] = {};
    xmc_stream *consumer = nullptr;
    std::vector<xmc_slot *> slots;
    std::vector<xmc_slot_info> info;
    std::vector<xmc_request *> reqs;
    std::vector<std::vector<void *>> sources;  // per request: the pinned memory its copies read
    std::vector<std::unique_ptr<std::vector<char>>> unpinned;
    uint64_t free0 = 0;

    const xmc_backend *api() const { return env->api; }
    xmc_instance *inst() const { return env->inst; }

    void *pinned(size_t n, int tag) {
        xmc_pin_result r{};
        if (api()->pin_alloc(inst(), n, 64, XMC_NO_DEVICE, &r) != XMC_OK) return nullptr;
        env->pinned.push_back(r.base);
        fill(static_cast<char *>(r.base), n, tag);
        return r.base;
    }
    // A source of class `c` for a slot of n bytes, and the length to pass.
    const void *source(Source c, size_t n, int tag, size_t *bytes, std::vector<void *> *keep) {
        *bytes = n;
        char *p = nullptr;
        switch (c) {
        case Source::Valid: p = static_cast<char *>(pinned(n, tag)); break;
        case Source::Null: return nullptr;
        case Source::Short: p = static_cast<char *>(pinned(n, tag)); *bytes = n - 1; break;
        case Source::NotPinned:
            unpinned.push_back(std::make_unique<std::vector<char>>(n, 3));
            return unpinned.back()->data();
        case Source::NotBase: {
            char *b = static_cast<char *>(pinned(n + 4096, tag));
            keep->push_back(b);
            return b + 4096;
        }
        case Source::BlockTooSmall: p = static_cast<char *>(pinned(n / 2, tag)); break;
        }
        keep->push_back(p);
        return p;
    }
    void forget(const std::vector<void *> &keep) {
        for (void *p : keep) env->free_source(p);
    }
    void add_request(xmc_request *r, std::vector<void *> keep) {
        reqs.push_back(r);
        sources.push_back(std::move(keep));
        env->requests.push_back(r);
    }
    // The first, the last and one more window of a slot's bytes, read on `s`
    // into poisoned buffers and compared with tag's (the deterministic tests
    // compare whole slots; sequences sample, to stay fast).
    bool check(int slot, xmc_stream *s, int tag, uint32_t r) {
        constexpr size_t kWindow = 64 << 10;
        const xmc_slot_info &i = info[slot];
        const size_t w = std::min(kWindow, i.size);
        const size_t offs[3] = {0, i.size - w, (static_cast<size_t>(r) % (i.size / 8)) * 8 / w * w};
        std::vector<char> got[3];
        for (int k = 0; k < 3; ++k) {
            got[k].assign(std::min(w, i.size - offs[k]), kPoison);
            xmc_copy_desc d = Env::linear(static_cast<char *>(i.address) + offs[k], XMC_MEM_DEVICE, got[k].data(),
                                          XMC_MEM_HOST, got[k].size());
            if (api()->copy(inst(), &d, s) != XMC_OK) return false;
        }
        if (api()->stream_synchronize(inst(), s) != XMC_OK) return false;
        for (int k = 0; k < 3; ++k)
            if (tag != kNoTag && mismatch(got[k], tag, offs[k]) != SIZE_MAX) return false;
        return true;
    }
    bool write(int slot, int tag) {
        const xmc_slot_info &i = info[slot];
        std::vector<char> data = pattern(tag, i.size);
        xmc_copy_desc d = Env::linear(data.data(), XMC_MEM_HOST, i.address, XMC_MEM_DEVICE, i.size);
        return api()->copy(inst(), &d, env->io) == XMC_OK && api()->stream_synchronize(inst(), env->io) == XMC_OK;
    }
};

std::function<std::unique_ptr<VmmSut>(const std::string &)> vmm_sut_factory(const std::string &options) {
    return [options](const std::string &name) -> std::unique_ptr<VmmSut> {
        const LoadedBackend *b = load_backend(name, nullptr);
        if (!b) return nullptr;
        auto s = std::make_unique<VmmSut>();
        s->backend = name;
        if (g_stuck.count(name)) return s;  // no instance: every command fails at once
        std::string why;
        s->env = Env::open(b->api, options.c_str(), &why);
        if (!s->env) return nullptr;
        for (auto *&on : s->on)
            if (b->api->stream_create(s->env->inst, 0, &on) == XMC_OK) s->env->streams.push_back(on);
        if (b->api->stream_create(s->env->inst, 0, &s->consumer) == XMC_OK) s->env->streams.push_back(s->consumer);
        uint64_t total = 0;
        b->api->device_free_memory(s->env->inst, 0, &s->free0, &total);
        return s;
    };
}

using VmmCmd = rc::state::Command<SlotModel, VmmSut>;

void not_stuck(const VmmSut &s) {
    auto it = g_stuck.find(s.backend);
    if (it != g_stuck.end()) RC_FAIL("the backend got stuck in an earlier sequence: " + it->second);
}


int live_slots(const SlotModel &m) {
    int n = 0;
    for (size_t i = 0; i < m.slots().size(); ++i) n += m.live_slot(static_cast<int>(i));
    return n;
}
int live_requests(const SlotModel &m) {
    int n = 0;
    for (size_t i = 0; i < m.requests().size(); ++i) n += m.live_request(static_cast<int>(i));
    return n;
}
rc::Gen<int> any_of(size_t n) { return n ? rc::gen::inRange(0, static_cast<int>(n)) : rc::gen::just(0); }
// Mostly one of `good` (the targets the command's precondition admits), and
// with `wild` sometimes any index below n (the refusals a mix draws).
rc::Gen<int> pick(std::vector<int> good, size_t n, bool wild) {
    if (good.empty()) return any_of(n);
    if (!wild) return rc::gen::elementOf(good);
    return rc::gen::weightedOneOf<int>({{3, rc::gen::elementOf(good)}, {1, any_of(n)}});
}
template <class Pred>
std::vector<int> slots_where(const SlotModel &m, Pred p) {
    std::vector<int> v;
    for (size_t i = 0; i < m.slots().size(); ++i)
        if (p(static_cast<int>(i))) v.push_back(static_cast<int>(i));
    return v;
}
template <class Pred>
std::vector<int> requests_where(const SlotModel &m, Pred p) {
    std::vector<int> v;
    for (size_t i = 0; i < m.requests().size(); ++i)
        if (m.live_request(static_cast<int>(i)) && p(m.requests()[i])) v.push_back(static_cast<int>(i));
    return v;
}

bool nameable(unsigned F, const SlotModel &m, int s) {
    return s >= 0 && static_cast<size_t>(s) < m.slots().size() && ((F & kCloseAny) || m.live_slot(s));
}
bool is_released(const SlotModel &m, int s) {
    const SlotState st = m.slots()[s].state;
    return st == SlotState::ReleasePending || st == SlotState::Released;
}
// Nothing in flight on it: closing it races nothing.
bool idle(const SlotModel &m, int s) {
    if (s < 0 || size_t(s) >= m.slots().size() || !m.live_slot(s)) return false;
    const model::ModelSlot &x = m.slots()[s];
    if (x.copy_in_flight) return false;
    if (x.state == SlotState::Mapped || x.state == SlotState::Released) return true;
    return x.state == SlotState::RemapPending && m.requests()[x.request].worker_done;
}
std::string show_slots(const std::vector<int> &v) {
    std::string s;
    for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return "{" + s + "}";
}
const char *source_name(Source c) {
    switch (c) {
    case Source::Valid: return "pinned";
    case Source::Null: return "NULL";
    case Source::Short: return "short";
    case Source::NotPinned: return "unpinned";
    case Source::NotBase: return "interior";
    case Source::BlockTooSmall: return "small-block";
    }
    return "?";
}

struct Create : VmmCmd {
    const unsigned F = t_mix;
    size_t bytes = *rc::gen::element<size_t>(1, 1 << 20, 2 << 20, (2 << 20) + 1);
    explicit Create(const SlotModel &) {}
    void checkPreconditions(const SlotModel &m) const override {
        const bool room = live_slots(m) < 4 && m.slots().size() < 8;
        RC_PRE(room);
    }
    void apply(SlotModel &m) const override { m.create(bytes); }
    void run(const SlotModel &, VmmSut &s) const override {
        not_stuck(s);
        xmc_slot *h = nullptr;
        xmc_slot_info info{};
        RC_ASSERT(s.api()->slot_create(s.inst(), 0, bytes, &h, &info) == XMC_OK);
        RC_ASSERT(info.size >= bytes);
        RC_ASSERT(static_cast<bool>(info.address));
        s.env->slots.push_back(h);
        s.slots.push_back(h);
        s.info.push_back(info);
    }
    void show(std::ostream &os) const override { os << "create(" << bytes << ")"; }
};

struct Write : VmmCmd {
    const unsigned F = t_mix;
    int slot, tag;
    explicit Write(const SlotModel &m)
        : slot(*pick(slots_where(m, [&](int x) { return m.accessible(x); }), m.slots().size(), false)),
          tag(*rc::gen::inRange(1, 1 << 30)) {}
    void checkPreconditions(const SlotModel &m) const override { RC_PRE(m.accessible(slot)); }
    void apply(SlotModel &m) const override { m.write(slot, tag); }
    void run(const SlotModel &, VmmSut &s) const override {
        not_stuck(s); RC_ASSERT(s.write(slot, tag)); }
    void show(std::ostream &os) const override { os << "write(slot" << slot << ", data " << tag << ")"; }
};

// VMM-STABLE: the bytes at the address create returned are the model's.
struct Check : VmmCmd {
    const unsigned F = t_mix;
    int slot;
    uint32_t where = *rc::gen::arbitrary<uint32_t>();
    explicit Check(const SlotModel &m)
        : slot(*pick(slots_where(m, [&](int x) { return m.accessible(x); }), m.slots().size(), false)) {}
    void checkPreconditions(const SlotModel &m) const override { RC_PRE(m.accessible(slot)); }
    void apply(SlotModel &) const override {}
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        RC_ASSERT(s.check(slot, s.env->io, m.slots()[slot].content, where));
    }
    void show(std::ostream &os) const override { os << "check(slot" << slot << ")"; }
};

struct Release : VmmCmd {
    const unsigned F = t_mix;
    int slot, on;
    explicit Release(const SlotModel &m)
        : slot(*pick(slots_where(m, [&](int x) { return m.live_slot(x) && m.slots()[x].state == SlotState::Mapped; }),
                     m.slots().size(), F & (kBusy | kCloseAny))),
          on((F & kOneStream) ? 0 : *rc::gen::inRange(0, 2)) {}
    void checkPreconditions(const SlotModel &m) const override {
        const bool ok = nameable(F, m, slot) && live_requests(m) < 8;
        RC_PRE(ok);
        if (!(F & kBusy) && m.live_slot(slot)) RC_PRE(m.slots()[slot].state == SlotState::Mapped);
    }
    void apply(SlotModel &m) const override { m.release({slot}); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.release({slot});
        xmc_request *r = nullptr;
        const xmc_status got = s.api()->slot_release(s.inst(), s.slots[slot], s.on[on], &r);
        RC_ASSERT(got == want);
        if (got == XMC_OK) s.add_request(r, {});
    }
    void show(std::ostream &os) const override { os << "release(slot" << slot << ", stream " << on << ")"; }
};

struct Remap : VmmCmd {
    const unsigned F = t_mix;
    int slot, on, tag;
    Source src;
    bool defer;
    explicit Remap(const SlotModel &m)
        : slot(*pick(slots_where(m, [&](int x) { return m.live_slot(x) && is_released(m, x); }), m.slots().size(),
                     F & (kBusy | kCloseAny))),
          on((F & kOneStream) ? 0 : *rc::gen::inRange(0, 2)), tag(*rc::gen::inRange(1, 1 << 30)),
          src((F & kBadSource) ? *rc::gen::element(Source::Valid, Source::Valid, Source::Null, Source::Short,
                                                   Source::NotPinned, Source::NotBase, Source::BlockTooSmall)
                               : Source::Valid),
          defer(*rc::gen::arbitrary<bool>()) {}
    void checkPreconditions(const SlotModel &m) const override {
        const bool ok = nameable(F, m, slot) && live_requests(m) < 8;
        RC_PRE(ok);
        if (!(F & kBusy) && m.live_slot(slot)) RC_PRE(is_released(m, slot));
    }
    uint32_t flags() const { return defer ? XMC_REMAP_DEFER_COPY : 0; }
    void apply(SlotModel &m) const override { m.remap({slot}, {src}, {tag}, flags()); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.remap({slot}, {src}, {tag}, flags());
        std::vector<void *> keep;
        size_t bytes = 0;
        const void *p = s.source(src, s.info[slot].size, tag, &bytes, &keep);
        xmc_request *r = nullptr;
        const xmc_status got = s.api()->slot_remap(s.inst(), s.slots[slot], s.on[on], p, bytes, flags(), &r);
        RC_ASSERT(got == want);
        if (got == XMC_OK) s.add_request(r, keep);
        else s.forget(keep);
    }
    void show(std::ostream &os) const override {
        os << "remap(slot" << slot << ", " << source_name(src) << " source " << tag << (defer ? ", deferred" : "")
           << ", stream " << on << ")";
    }
};

// Several slots, by a mask over the slots so far; with kDup the first is
// sometimes named again.
std::vector<int> gen_batch(unsigned F, const SlotModel &m, const std::vector<int> &eligible) {
    const bool wild = (F & kBusy) || eligible.empty() || *rc::gen::inRange(0, 8) == 0;
    std::vector<int> from = eligible;
    if (wild) from = slots_where(m, [](int) { return true; });
    std::vector<int> v;
    const auto mask =
        *rc::gen::container<std::vector<bool>>(std::max<size_t>(from.size(), 1), rc::gen::arbitrary<bool>());
    for (size_t i = 0; i < from.size(); ++i)
        if (mask[i]) v.push_back(from[i]);
    if (v.empty()) v.push_back(from.empty() ? 0 : from.front());
    if ((F & kDup) && *rc::gen::inRange(0, 3) == 0) v.push_back(v.front());
    return v;
}

bool batch_ok(unsigned F, const SlotModel &m, const std::vector<int> &v) {
    for (int x : v)
        if (!nameable(F, m, x)) return false;
    return (F & kDup) || std::set<int>(v.begin(), v.end()).size() == v.size();
}

struct ReleaseBatch : VmmCmd {
    const unsigned F = t_mix;
    std::vector<int> slots;
    int on;
    explicit ReleaseBatch(const SlotModel &m)
        : slots(gen_batch(F, m, slots_where(m, [&](int x) {
                              return m.live_slot(x) && m.slots()[x].state == SlotState::Mapped;
                          }))),
          on((F & kOneStream) ? 0 : *rc::gen::inRange(0, 2)) {}
    void checkPreconditions(const SlotModel &m) const override {
        const bool ok = batch_ok(F, m, slots) && live_requests(m) < 8;
        RC_PRE(ok);
        if (!(F & kBusy))
            for (int x : slots) {
                const bool ok = !m.live_slot(x) || m.slots()[x].state == SlotState::Mapped;
                RC_PRE(ok);
            }
    }
    void apply(SlotModel &m) const override { m.release(slots); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.release(slots);
        std::vector<xmc_slot *> h;
        for (int x : slots) h.push_back(s.slots[x]);
        xmc_request *r = nullptr;
        const xmc_status got = s.api()->slot_release_batch(s.inst(), h.data(), h.size(), s.on[on], &r);
        RC_ASSERT(got == want);
        if (got == XMC_OK) s.add_request(r, {});
    }
    void show(std::ostream &os) const override {
        os << "release_batch(" << show_slots(slots) << ", stream " << on << ")";
    }
};

struct RemapBatch : VmmCmd {
    const unsigned F = t_mix;
    std::vector<int> slots, tags;
    int on;
    bool defer;
    explicit RemapBatch(const SlotModel &m)
        : slots(gen_batch(F, m, slots_where(m, [&](int x) { return m.live_slot(x) && is_released(m, x); }))),
          on((F & kOneStream) ? 0 : *rc::gen::inRange(0, 2)), defer(*rc::gen::arbitrary<bool>()) {
        for (size_t i = 0; i < slots.size(); ++i) tags.push_back(*rc::gen::inRange(1, 1 << 30));
    }
    void checkPreconditions(const SlotModel &m) const override {
        const bool ok = batch_ok(F, m, slots) && live_requests(m) < 8;
        RC_PRE(ok);
        if (!(F & kBusy))
            for (int x : slots) {
                const bool ok = !m.live_slot(x) || is_released(m, x);
                RC_PRE(ok);
            }
    }
    uint32_t flags() const { return defer ? XMC_REMAP_DEFER_COPY : 0; }
    std::vector<Source> sources() const { return std::vector<Source>(slots.size(), Source::Valid); }
    void apply(SlotModel &m) const override { m.remap(slots, sources(), tags, flags()); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.remap(slots, sources(), tags, flags());
        std::vector<xmc_slot *> h;
        std::vector<const void *> src;
        std::vector<size_t> bytes;
        std::vector<void *> keep;
        for (size_t i = 0; i < slots.size(); ++i) {
            h.push_back(s.slots[slots[i]]);
            size_t n = 0;
            src.push_back(s.source(Source::Valid, s.info[slots[i]].size, tags[i], &n, &keep));
            bytes.push_back(n);
        }
        xmc_request *r = nullptr;
        const xmc_status got = s.api()->slot_remap_batch(s.inst(), h.data(), h.size(), s.on[on], src.data(),
                                                         bytes.data(), flags(), &r);
        RC_ASSERT(got == want);
        if (got == XMC_OK) s.add_request(r, keep);
        else s.forget(keep);
    }
    void show(std::ostream &os) const override {
        os << "remap_batch(" << show_slots(slots) << (defer ? ", deferred" : "") << ", stream " << on << ")";
    }
};

struct Launch : VmmCmd {
    const unsigned F = t_mix;
    int req = 0, on;
    uint32_t index = 0;
    explicit Launch(const SlotModel &m) : on((F & kOneStream) ? 0 : *rc::gen::inRange(0, 2)) {
        std::vector<std::pair<int, uint32_t>> good;  // launchable now
        for (size_t r = 0; r < m.requests().size(); ++r)
            for (uint32_t i = 0; i < m.requests()[r].slots.size(); ++i) {
                SlotModel next = m;
                if (next.launch(static_cast<int>(r), i) == XMC_OK) good.emplace_back(static_cast<int>(r), i);
            }
        const bool wild = (F & kRelaunch) && *rc::gen::inRange(0, 3) == 0;
        if (good.empty() || wild) {
            req = *any_of(m.requests().size());
            index = static_cast<uint32_t>(*rc::gen::inRange(0, 3));
        } else {
            std::tie(req, index) = *rc::gen::elementOf(good);
        }
    }
    void checkPreconditions(const SlotModel &m) const override {
        RC_PRE(m.live_request(req));
        if (F & kRelaunch) {
            RC_PRE(index <= m.requests()[req].slots.size());
        } else {
            SlotModel next = m;
            RC_PRE(next.launch(req, index) == XMC_OK);
        }
    }
    void apply(SlotModel &m) const override { m.launch(req, index); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.launch(req, index);
        RC_ASSERT(s.api()->request_launch_copy(s.inst(), s.reqs[req], index, s.on[on]) == want);
    }
    void show(std::ostream &os) const override {
        os << "launch_copy(request" << req << ", slot index " << index << ", stream " << on << ")";
    }
};

struct Wait : VmmCmd {
    const unsigned F = t_mix;
    int req;
    explicit Wait(const SlotModel &m)
        : req(*pick(requests_where(m, [](const auto &q) { return !q.worker_done; }), m.requests().size(), true)) {}
    void checkPreconditions(const SlotModel &m) const override { RC_PRE(m.live_request(req)); }
    void apply(SlotModel &m) const override { m.wait(req); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.wait(req);
        const xmc_status got = s.api()->request_wait(s.inst(), s.reqs[req], kWaitMs);
        if (got == XMC_ERR_TIMEOUT) {
            s.env->leak();
            g_stuck[s.backend] = "request" + std::to_string(req) + " was not finished after " +
                                 std::to_string(kWaitMs) + " ms";
            RC_FAIL(g_stuck[s.backend]);
        }
        RC_ASSERT(got == want);
    }
    void show(std::ostream &os) const override { os << "wait(request" << req << ")"; }
};

struct Adopt : VmmCmd {
    const unsigned F = t_mix;
    int req;
    explicit Adopt(const SlotModel &m)
        : req(*pick(requests_where(m, [](const auto &q) { return q.kind == RequestKind::Remap && !q.adopted; }),
                    m.requests().size(), F & kBusy)) {}
    void checkPreconditions(const SlotModel &m) const override {
        RC_PRE(m.live_request(req));
        if (!(F & kBusy)) {
            const auto &q = m.requests()[req];
            const bool ok = q.kind == RequestKind::Remap && !q.adopted;
            RC_PRE(ok);
        }
    }
    void apply(SlotModel &m) const override { m.adopt(req); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.adopt(req);
        RC_ASSERT(s.api()->request_adopt(s.inst(), s.reqs[req]) == want);
    }
    void show(std::ostream &os) const override { os << "adopt(request" << req << ")"; }
};

struct Destroy : VmmCmd {
    const unsigned F = t_mix;
    int req;
    explicit Destroy(const SlotModel &m)
        : req(*pick(requests_where(m, [](const auto &) { return true; }), m.requests().size(), false)) {}
    void checkPreconditions(const SlotModel &m) const override { RC_PRE(m.live_request(req)); }
    void apply(SlotModel &m) const override { m.destroy(req); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.destroy(req);
        RC_ASSERT(s.api()->request_destroy(s.inst(), s.reqs[req]) == want);
        auto &live = s.env->requests;
        live.erase(std::remove(live.begin(), live.end(), s.reqs[req]), live.end());
        s.forget(s.sources[req]);  // no copy reads them any more
        s.sources[req].clear();
    }
    void show(std::ostream &os) const override { os << "destroy(request" << req << ")"; }
};

struct Close : VmmCmd {
    const unsigned F = t_mix;
    int slot;
    explicit Close(const SlotModel &m)
        : slot(*pick(slots_where(m, [&](int x) { return (F & kCloseAny) ? m.live_slot(x) : idle(m, x); }),
                     m.slots().size(), F & kCloseAny)) {}
    void checkPreconditions(const SlotModel &m) const override {
        if (F & kCloseAny) RC_PRE(nameable(F, m, slot));  // work in flight, or closed already
        else RC_PRE(idle(m, slot));
    }
    void apply(SlotModel &m) const override { m.close(slot); }
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        SlotModel next = m;
        const xmc_status want = next.close(slot);
        RC_ASSERT(s.api()->slot_close(s.inst(), s.slots[slot]) == want);
        auto &open = s.env->slots;
        open.erase(std::remove(open.begin(), open.end(), s.slots[slot]), open.end());
    }
    void show(std::ostream &os) const override { os << "close(slot" << slot << ")"; }
};

struct Query : VmmCmd {
    const unsigned F = t_mix;
    int req;
    explicit Query(const SlotModel &m)
        : req(*pick(requests_where(m, [](const auto &) { return true; }), m.requests().size(), false)) {}
    void checkPreconditions(const SlotModel &m) const override { RC_PRE(m.live_request(req)); }
    void apply(SlotModel &) const override {}
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        const model::ModelRequest &q = m.requests()[req];
        xmc_request_info i{};
        RC_ASSERT(s.api()->request_query(s.inst(), s.reqs[req], &i) == XMC_OK);
        RC_ASSERT(i.slots == q.slots.size());
        RC_ASSERT(i.adopted == (q.adopted ? 1u : 0u));
        RC_ASSERT(i.status == XMC_OK);
        if (q.worker_done) {
            RC_ASSERT(i.done == 1);
            RC_ASSERT(i.callback_fired == 1);
            if (q.kind == RequestKind::Remap)
                RC_ASSERT(i.copies_launched ==
                          static_cast<uint32_t>(std::count(q.launched.begin(), q.launched.end(), true)));
        }
    }
    void show(std::ostream &os) const override { os << "query(request" << req << ")"; }
};

// VMM-RELEASE-ORDER / VMM-REMAP-COPY: with nothing pending, the device's free
// memory is what the slots holding memory leave.
struct CheckMemory : VmmCmd {
    const unsigned F = t_mix;
    explicit CheckMemory(const SlotModel &) {}
    void checkPreconditions(const SlotModel &m) const override {
        for (size_t r = 0; r < m.requests().size(); ++r)
            RC_PRE(!m.live_request(static_cast<int>(r)) || m.requests()[r].worker_done);  // r is in range
        for (const auto &x : m.slots()) RC_PRE(x.state != SlotState::ReleasePending);
    }
    void apply(SlotModel &) const override {}
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        uint64_t held = 0;
        for (size_t i = 0; i < m.slots().size(); ++i)
            if (m.holds_memory(static_cast<int>(i))) held += s.info[i].size;
        uint64_t free_now = 0, total = 0;
        RC_ASSERT(s.api()->device_free_memory(s.inst(), 0, &free_now, &total) == XMC_OK);
        RC_ASSERT(free_now == s.free0 - held);
    }
    void show(std::ostream &os) const override { os << "check_free_memory()"; }
};

// VMM-EVENT-WAIT: a consumer told to wait for the request's copies reads
// what they leave, whether or not they have finished. Only once the remap's
// worker is known done: a driver refuses to enqueue a copy that names an
// unmapped range (the told-before-the-copy-exists case, with the old mapping
// still in place, is VMM_EVENT_WAIT_ConsumerToldBeforeTheCopyExistsWaitsForIt).
struct StreamWait : VmmCmd {
    const unsigned F = t_mix;
    int req = 0;
    uint32_t index = 0;
    uint32_t where = *rc::gen::arbitrary<uint32_t>();
    explicit StreamWait(const SlotModel &m) {
        std::vector<std::pair<int, uint32_t>> good;  // copies started, mapping still the request's
        for (size_t r = 0; r < m.requests().size(); ++r)
            for (uint32_t i = 0; i < m.requests()[r].slots.size(); ++i)
                if (m.requests()[r].worker_done && m.after_copies(static_cast<int>(r), i) != kNoTag)
                    good.emplace_back(static_cast<int>(r), i);
        if (!good.empty()) std::tie(req, index) = *rc::gen::elementOf(good);
    }
    void checkPreconditions(const SlotModel &m) const override {
        // One bool: RC_PRE's decomposition does not short-circuit.
        const bool ok = m.live_request(req) && m.requests()[req].worker_done && m.after_copies(req, index) != kNoTag;
        RC_PRE(ok);
    }
    void apply(SlotModel &) const override {}
    void run(const SlotModel &m, VmmSut &s) const override {
        not_stuck(s);
        RC_ASSERT(s.api()->request_stream_wait(s.inst(), s.reqs[req], s.consumer) == XMC_OK);
        RC_ASSERT(s.check(m.requests()[req].slots[index], s.consumer, m.after_copies(req, index), where));
    }
    void show(std::ostream &os) const override {
        os << "consumer_waits_and_reads(request" << req << ", slot index " << index << ")";
    }
};

template <class... Cmds>
void run_stateful(unsigned mix, const std::string &backend, const std::string &options) {
    t_mix = mix;
    g_stuck.clear();
    check_stateful<SlotModel, VmmSut>(backend, SlotModel{}, vmm_sut_factory(options), [](const SlotModel &m) {
        return rc::state::gen::execOneOfWithArgs<Cmds...>()(m);
    });
}

// Each requirement's property: its mix of commands and the refusals it draws.
TEST_P(VmmTest, VMM_STABLE_StatefulSequencesAgreeWithModel) {
    run_stateful<Create, Create, Write, Check, Check, Release, Remap, ReleaseBatch, RemapBatch, Launch, Wait, Wait,
                 Adopt, Adopt, Destroy, Close, Query, CheckMemory>(0, GetParam(), "");
}

TEST_P(VmmTest, VMM_SERIAL_StatefulSequencesAgreeWithModel) {
    run_stateful<Create, Create, Write, Check, Check, Release, Remap, ReleaseBatch, RemapBatch, Launch, Wait, Wait,
                 Adopt, Adopt, Destroy, Close, Query, CheckMemory>(kOneStream, GetParam(), "vmm_workers=1");
}

TEST_P(VmmTest, VMM_STATE_StatefulSequencesAgreeWithModel) {
    run_stateful<Create, Write, Check, Release, Release, Remap, Remap, Wait, Adopt, Destroy, Query>(kBusy, GetParam(),
                                                                                                      "");
}

TEST_P(VmmTest, VMM_BATCH_StatefulSequencesAgreeWithModel) {
    run_stateful<Create, Create, Write, Check, ReleaseBatch, ReleaseBatch, RemapBatch, RemapBatch, Wait, Adopt,
                 Destroy, Launch, Query>(kDup, GetParam(), "");
}

TEST_P(VmmTest, VMM_DEFERRED_StatefulSequencesAgreeWithModel) {
    run_stateful<Create, Write, Check, Release, Remap, RemapBatch, Launch, Launch, Wait, Adopt, Destroy, Query>(
        kRelaunch, GetParam(), "");
}

TEST_P(VmmTest, VMM_CLOSE_StatefulSequencesAgreeWithModel) {
    run_stateful<Create, Write, Check, Release, Remap, Remap, Launch, Launch, Wait, Adopt, Destroy, Close, Query,
                 CheckMemory>(kCloseAny, GetParam(), "");
}

TEST_P(VmmTest, VMM_REMAP_COPY_StatefulSequencesAgreeWithModel) {
    run_stateful<Create, Write, Check, Check, Release, Remap, Remap, Wait, Adopt, Destroy, CheckMemory>(
        kBadSource, GetParam(), "");
}

TEST_P(VmmTest, VMM_EVENT_WAIT_StatefulSequencesAgreeWithModel) {
    run_stateful<Create, Write, Check, Release, Remap, RemapBatch, Launch, Wait, Adopt, Destroy, StreamWait,
                 StreamWait>(0, GetParam(), "");
}

XMC_INSTANTIATE_FOR_BACKENDS(VmmTest);

} // namespace
} // namespace xmc::conformance
