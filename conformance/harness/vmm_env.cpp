// The VMM harness (vmm_env.hpp): slot data, the instance a slot test works
// on, the fault hook of the slot workers and the fixture.
#include "vmm_env.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

namespace xmc::conformance {
namespace {

uint64_t splitmix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// A table of random words per tag, each word also mixed with its offset.
struct Words {
    uint64_t w[4096];
    explicit Words(int tag) {
        for (uint64_t i = 0; i < 4096; ++i) w[i] = splitmix((static_cast<uint64_t>(tag) << 20) ^ i);
    }
    uint64_t at(uint64_t i) const { return w[i & 4095] ^ (i * 0x9E3779B97F4A7C15ull); }
};

// A tag's table, made once per thread: the stateful properties fill and check thousands of
// granules with a few tags, and making the table each time cost more than the filling (a tenth
// of a VMM property's time on the host). A thread that met many tags starts over.
const Words &words(int tag) {
    thread_local std::map<int, std::unique_ptr<Words>> cache;
    if (cache.size() > 64) cache.clear();
    std::unique_ptr<Words> &w = cache[tag];
    if (!w) w = std::make_unique<Words>(tag);
    return *w;
}

} // namespace

// ---- data -------------------------------------------------------------------

void fill(char *p, size_t n, int tag) {
    const Words &t = words(tag);
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

size_t mismatch(const std::vector<char> &got, int tag, size_t at) {
    const Words &t = words(tag);
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

std::vector<std::string> read_maps() {
    std::vector<std::string> v;
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) v.push_back(line);
    return v;
}

std::vector<std::string> maps_overlapping(const std::vector<std::string> &maps, const void *addr, size_t n) {
    const auto lo = reinterpret_cast<uintptr_t>(addr), hi = lo + n;
    std::vector<std::string> v;
    for (const std::string &line : maps) {
        unsigned long a = 0, b = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx", &a, &b) == 2 && b > lo && a < hi) v.push_back(line);
    }
    return v;
}

size_t memfd_mappings() {
    size_t n = 0;
    for (const std::string &line : read_maps()) n += line.find("/memfd:") != std::string::npos;
    return n;
}

std::vector<std::string> ledger_ranges_overlapping(const DriverControl &c, const void *addr, size_t n) {
    // "address reservation 0x<base>, <n> bytes" and "mapping 0x<va>, <n> bytes, ..." (fake CUDA);
    // "reservation 0x<base> size=<n> ..." and "mapping 0x<va> size=<n> ..." (fake Level Zero).
    const auto lo = reinterpret_cast<uintptr_t>(addr), hi = lo + n;
    std::vector<std::string> v;
    std::istringstream in(c.ledger_text());
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("address reservation ", 0) != 0 && line.rfind("reservation ", 0) != 0 &&
            line.rfind("mapping ", 0) != 0)
            continue;
        const size_t at = line.find("0x");
        if (at == std::string::npos) continue;
        char *rest = nullptr;
        const unsigned long long base = std::strtoull(line.c_str() + at, &rest, 16);
        while (*rest == ',' || *rest == ' ') ++rest;
        if (std::strncmp(rest, "size=", 5) == 0) rest += 5;
        const unsigned long long size = std::strtoull(rest, nullptr, 10);
        if (base < hi && lo < base + size) v.push_back(line);
    }
    return v;
}

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

// ---- warm-up ----------------------------------------------------------------

namespace {
void nothing(void *) {}
} // namespace

void warm_up(const xmc_backend *api, xmc_instance *inst) {
    xmc_stream *s = nullptr;
    if (api->stream_create(inst, 0, &s) != XMC_OK) return;
    api->host_callback(inst, s, &nothing, nullptr);
    xmc_event *ev = nullptr;
    if (api->event_create(inst, 0, &ev) == XMC_OK) {
        api->event_record(inst, ev, s);
        api->event_synchronize(inst, ev);
    }
    char bytes[64] = {};
    xmc_pin_result pin{};
    const int32_t dev = (api->capabilities & XMC_CAP_PIN_REGISTER) ? 0 : XMC_NO_DEVICE;
    const bool pinned = (api->capabilities & XMC_CAP_PIN) && api->pin_alloc(inst, sizeof bytes, 64, dev, &pin) == XMC_OK;
    xmc_slot *slot = nullptr;
    xmc_slot_info info{};
    if (api->slot_create(inst, 0, 1, &slot, &info) == XMC_OK) {
        xmc_copy_desc in = Env::linear(bytes, XMC_MEM_HOST, info.address, XMC_MEM_DEVICE, sizeof bytes);
        api->copy(inst, &in, s);
        xmc_copy_desc out = Env::linear(info.address, XMC_MEM_DEVICE, pinned ? pin.base : bytes,
                                        pinned ? XMC_MEM_PINNED : XMC_MEM_HOST, sizeof bytes);
        api->copy(inst, &out, s);
        api->stream_synchronize(inst, s);
        api->slot_close(inst, slot);
    }
    api->stream_synchronize(inst, s);
    if (ev) api->event_destroy(inst, ev);
    if (pinned) api->pin_free(inst, pin.base);
    api->stream_destroy(inst, s);
}

// ---- Env --------------------------------------------------------------------

std::unique_ptr<Env> Env::open(const xmc_backend *api, const char *options, std::string *why) {
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
    warm_up(api, e->inst);  // before any test takes a snapshot of free memory or of the ledger
    return e;
}

Env::~Env() {
    if (!inst || leaked) return;
    for (auto *s : capturing) {  // a capture left open refuses the stream's synchronize
        xmc_graph *g = nullptr;
        if (api->graph_end(inst, s, &g) == XMC_OK) graphs.push_back(g);
    }
    for (auto &g : gates) g->release();
    for (auto *r : requests) api->request_wait(inst, r, kWaitMs);
    for (auto *s : streams) api->stream_synchronize(inst, s);
    if (io) api->stream_synchronize(inst, io);
    for (auto *g : graphs) api->graph_destroy(inst, g);  // their launches are done: the streams are
    for (auto *s : slots) api->slot_close(inst, s);
    for (auto *r : requests) api->request_destroy(inst, r);
    for (auto *s : streams) api->stream_destroy(inst, s);
    if (io) api->stream_destroy(inst, io);
    for (void *p : pinned) api->pin_free(inst, p);
    api->close(inst);
}

std::string Env::error() const {
    xmc_error_info e{};
    api->last_error(inst, &e);
    std::ostringstream os;
    os << "[" << xmc_status_string(e.status) << ", native " << e.native_code << ", call '" << e.call << "'] "
       << e.message;
    return os.str();
}

::testing::AssertionResult Env::ok(xmc_status got) const {
    if (got == XMC_OK) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "expected ok, got " << xmc_status_string(got) << " " << error();
}

::testing::AssertionResult Env::refused(xmc_status want, xmc_status got, const char *call) const {
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

xmc_stream *Env::stream() {
    xmc_stream *s = nullptr;
    EXPECT_TRUE(ok(api->stream_create(inst, 0, &s)));
    if (s) streams.push_back(s);
    return s;
}

std::shared_ptr<Gate> Env::gate(xmc_stream *s) {
    auto g = std::make_shared<Gate>();
    gates.push_back(g);
    EXPECT_TRUE(ok(api->host_callback(inst, s, &Gate::hold, g.get())));
    return g;
}

void *Env::source(size_t n, int tag) {
    xmc_pin_result r{};
    EXPECT_TRUE(ok(api->pin_alloc(inst, n, 64, XMC_NO_DEVICE, &r)));
    if (!r.base) return nullptr;
    pinned.push_back(r.base);
    fill(static_cast<char *>(r.base), n, tag);
    return r.base;
}

void Env::free_source(void *p) {
    auto it = std::find(pinned.begin(), pinned.end(), p);
    if (it == pinned.end()) return;
    pinned.erase(it);
    api->pin_free(inst, p);
}

xmc_slot *Env::create(size_t bytes, xmc_slot_info *info) {
    xmc_slot *s = nullptr;
    *info = xmc_slot_info{};
    EXPECT_TRUE(ok(api->slot_create(inst, 0, bytes, &s, info))) << "slot_create(" << bytes << ")";
    if (s) slots.push_back(s);
    return s;
}

xmc_status Env::close(xmc_slot *s) {
    const xmc_status st = api->slot_close(inst, s);
    if (st == XMC_OK) slots.erase(std::remove(slots.begin(), slots.end(), s), slots.end());
    return st;
}

Env::Slot Env::mapped_slot(size_t bytes) {
    Slot s;
    s.slot = create(bytes, &s.info);
    return s;
}

Env::Slot Env::released_slot(size_t bytes) {
    Slot r = mapped_slot(bytes);
    xmc_request *q = nullptr;
    if (r.slot && ok(release(r.slot, io, &q))) {
        EXPECT_TRUE(ok(wait(q)));
        destroy(q);
    }
    return r;
}

Env::SlotAndSource Env::released_slot_with_source(size_t bytes, int tag) {
    const Slot r = released_slot(bytes);
    return {r.slot, r.info, r.slot ? source(r.info.size, tag) : nullptr};
}

xmc_status Env::release(xmc_slot *s, xmc_stream *on, xmc_request **r) {
    const xmc_status st = api->slot_release(inst, s, on, r);
    if (st == XMC_OK) requests.push_back(*r);
    return st;
}

xmc_status Env::remap(xmc_slot *s, xmc_stream *on, const void *src, size_t n, uint32_t flags, xmc_request **r) {
    const xmc_status st = api->slot_remap(inst, s, on, src, n, flags, r);
    if (st == XMC_OK) requests.push_back(*r);
    return st;
}

xmc_status Env::release_batch(const std::vector<xmc_slot *> &s, xmc_stream *on, xmc_request **r) {
    const xmc_status st = api->slot_release_batch(inst, s.data(), s.size(), on, r);
    if (st == XMC_OK) requests.push_back(*r);
    return st;
}

xmc_status Env::remap_batch(const std::vector<xmc_slot *> &s, xmc_stream *on, const std::vector<const void *> &src,
                            const std::vector<size_t> &n, uint32_t flags, xmc_request **r) {
    const xmc_status st = api->slot_remap_batch(inst, s.data(), s.size(), on, src.data(), n.data(), flags, r);
    if (st == XMC_OK) requests.push_back(*r);
    return st;
}

xmc_status Env::destroy(xmc_request *r) {
    const xmc_status st = api->request_destroy(inst, r);
    if (st == XMC_OK) requests.erase(std::remove(requests.begin(), requests.end(), r), requests.end());
    return st;
}

xmc_request_info Env::query(xmc_request *r) {
    xmc_request_info i{};
    EXPECT_TRUE(ok(api->request_query(inst, r, &i)));
    return i;
}

bool Env::write(const xmc_slot_info &slot, int tag) {
    std::vector<char> data = pattern(tag, slot.size);
    xmc_copy_desc d = linear(data.data(), XMC_MEM_HOST, slot.address, XMC_MEM_DEVICE, slot.size);
    return ok(api->copy(inst, &d, io)) && ok(api->stream_synchronize(inst, io));
}

std::vector<char> Env::read(const xmc_slot_info &slot, xmc_stream *s) {
    auto out = read_async(slot, s ? s : io);
    EXPECT_TRUE(ok(api->stream_synchronize(inst, s ? s : io)));
    std::vector<char> got = out->bytes();
    free_source(const_cast<char *>(out->data));
    return got;
}

std::shared_ptr<Env::PendingRead> Env::read_async(const xmc_slot_info &slot, xmc_stream *s) {
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

uint64_t Env::free_memory() {
    uint64_t f = 0, t = 0;
    EXPECT_TRUE(ok(api->device_free_memory(inst, 0, &f, &t)));
    return f;
}

xmc_status Env::begin_capture(xmc_stream *on) {
    const xmc_status st = api->graph_begin(inst, on);
    if (st == XMC_OK) capturing.push_back(on);
    return st;
}

xmc_graph *Env::end_capture(xmc_stream *on) {
    xmc_graph *g = nullptr;
    EXPECT_TRUE(ok(api->graph_end(inst, on, &g)));
    capturing.erase(std::remove(capturing.begin(), capturing.end(), on), capturing.end());
    if (g) graphs.push_back(g);
    return g;
}

xmc_graph *Env::capture_read(const xmc_slot_info &slot, xmc_stream *on, void *out) {
    if (!ok(begin_capture(on))) return nullptr;
    xmc_copy_desc d = linear(slot.address, XMC_MEM_DEVICE, out, XMC_MEM_PINNED, slot.size);
    EXPECT_TRUE(ok(api->copy(inst, &d, on)));
    return end_capture(on);
}

xmc_graph *Env::capture_write(const xmc_slot_info &slot, xmc_stream *on, const void *in) {
    if (!ok(begin_capture(on))) return nullptr;
    xmc_copy_desc d = linear(const_cast<void *>(in), XMC_MEM_PINNED, slot.address, XMC_MEM_DEVICE, slot.size);
    EXPECT_TRUE(ok(api->copy(inst, &d, on)));
    return end_capture(on);
}

char *Env::graph_buffer(size_t n) {
    xmc_pin_result r{};
    const int32_t dev = (api->capabilities & XMC_CAP_PIN_REGISTER) ? 0 : XMC_NO_DEVICE;
    EXPECT_TRUE(ok(api->pin_alloc(inst, n, 64, dev, &r)));
    if (!r.base) return nullptr;
    pinned.push_back(r.base);
    std::memset(r.base, kPoison, n);
    return static_cast<char *>(r.base);
}

xmc_copy_desc Env::linear(void *src, xmc_mem_kind sk, void *dst, xmc_mem_kind dk, size_t n) {
    xmc_copy_desc d{};
    d.src = {src, sk, 0, 0, 0, 0, n, n};
    d.dst = {dst, dk, 0, 0, 0, 0, n, n};
    d.width_bytes = n;
    d.height = d.depth = 1;
    return d;
}

// ---- fault injection (VMM-ASYNC-ERROR) --------------------------------------

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

// ---- the fixture ------------------------------------------------------------

void VmmTest::SetUp() {
    BackendTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    int32_t devices = 0;
    ASSERT_EQ(api->device_count(inst, &devices), XMC_OK) << last_error();
    if (devices == 0) XMC_SKIP(SkipKind::NoDevice, "backend '" << api->name << "' reports no device");
    ASSERT_TRUE(reopen(""));
}

void VmmTest::TearDown() {
    env_.reset();
    BackendTest::TearDown();
    // Over a fake driver: closing the instances left nothing alive in it.
    if (!leaked_any_)
        if (const DriverControl *c = driver_control(api, nullptr)) {
            EXPECT_EQ(c->live_objects(), 0u) << "the backend left driver objects behind:\n" << c->ledger_text();
        }
}

::testing::AssertionResult VmmTest::reopen(const std::string &options) {
    env_.reset();
    std::string why;
    env_ = Env::open(api, options.c_str(), &why);
    if (env_) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << why;
}

void VmmTest::leak() {
    env_->leak();
    env_.release();
    leaked_any_ = true;
}

} // namespace xmc::conformance
