// The fault sweep (SPEC 7): for every driver call that the registration,
// pinning, copy and open-to-close scenarios make, one run of the scenario in
// which exactly that call fails. Every run must
//   - not crash (and not hang);
//   - report the failure cleanly: the xmc call that met it answers a non-OK
//     status (XMC_ERR_DRIVER) whose detail carries the injected native code
//     and names the call, or the backend recovers so that nothing is wrong
//     afterwards (such sites are listed on stdout, not failed);
//   - leave the fake's ledger empty once the scenario's own cleanup and close
//     ran: no live object, and none that the driver had to reclaim with a
//     context (a clean program does not rely on that);
//   - leave the backend in a state the model allows: what failed to register
//     is not tracked (REG-FAIL), what failed to unregister still is, and a
//     retry removes it (REG-UNREG-FAIL), a block whose registration failed is
//     lock-only and says why with the driver's code (PIN-DEVICE), copies that
//     reported success wrote exactly the described bytes (COPY-STRIDED), and
//     afterwards nothing is registered or pinned.
//
// How the sites are found and hit:
//   1. A clean run of the scenario counts, with the fake's call counters, the
//      calls of every entry point made during each step (one step per xmc
//      call, named after it).
//   2. A site is "the j-th call of entry point E", for the calls made in the
//      steps the test sweeps (a test sweeps the steps of its own
//      requirement). The run for a site installs the one-shot fault "fail the
//      j-th call of E with a generic driver error" (CUDA_ERROR_UNKNOWN,
//      ZE_RESULT_ERROR_UNKNOWN). Counting per entry point gives exactly the
//      sites of "fail the k-th call, whatever it is" (fail:*:CODE@K), each
//      with a name.
//   3. The runs happen in a child process: this binary again (`xmc run` on
//      this one test, told by XMC_FAULT_SWEEP_REPORT to sweep and report).
//      A crash or a hang is reported with its site, and a fresh child goes on
//      from the next site; so does a run that leaves driver objects behind,
//      so every site starts from an empty ledger. A fresh process, not a
//      fork: the fake CUDA driver refuses every call in a forked child.
#include "driver_control.hpp"
#include "fixture.hpp"
#include "os_facts.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char **environ;

namespace xmc::conformance {
namespace {

// ---- the fakes' call counters and fault grammar ----------------------------

// Every entry point each fake counts calls of (the tables of
// fakes/cuda/fake_cuda_faults.cpp and fakes/level_zero/fake_ze_state.cpp).
// The clean run checks that they account for every call the fake counted, so
// an entry point missing here cannot hide a site from the sweep.
const char *const kCudaEntries[] = {
    "cuInit", "cuDriverGetVersion", "cuGetErrorName", "cuGetErrorString", "cuGetProcAddress",
    "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceGetUuid", "cuDeviceTotalMem",
    "cuDeviceGetAttribute", "cuDeviceGetPCIBusId", "cuDeviceCanAccessPeer", "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxGetState", "cuCtxCreate", "cuCtxDestroy", "cuCtxSetCurrent",
    "cuCtxGetCurrent", "cuCtxGetDevice", "cuCtxPushCurrent", "cuCtxPopCurrent", "cuCtxSynchronize",
    "cuCtxEnablePeerAccess", "cuCtxDisablePeerAccess", "cuMemAlloc", "cuMemFree", "cuMemGetInfo",
    "cuMemHostRegister", "cuMemHostUnregister", "cuMemHostGetDevicePointer", "cuMemHostGetFlags",
    "cuPointerGetAttribute", "cuStreamCreate", "cuStreamDestroy", "cuStreamSynchronize", "cuStreamQuery",
    "cuStreamWaitEvent", "cuEventCreate", "cuEventRecord", "cuEventQuery", "cuEventSynchronize",
    "cuEventDestroy", "cuEventElapsedTime", "cuLaunchHostFunc", "cuMemcpyAsync", "cuMemcpyHtoDAsync",
    "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync", "cuMemcpy2DAsync", "cuMemcpy3DAsync", "cuMemcpyPeerAsync", "cuMemcpy3DPeerAsync",
    "cuMemsetD8Async", "cuMemcpy", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyDtoD", "cuMemsetD8",
    "cuMemGetAllocationGranularity", "cuMemAddressReserve", "cuMemAddressFree", "cuMemCreate", "cuMemRelease",
    "cuMemMap", "cuMemUnmap", "cuMemSetAccess", "cuMemGetAccess", "cuStreamWaitValue32", "cuStreamWriteValue32"};

const char *const kZeEntries[] = {
    "zeInit", "zeDriverGet", "zeDriverGetApiVersion", "zeDriverGetProperties", "zeDriverGetExtensionProperties",
    "zeDeviceGet", "zeDeviceGetProperties", "zeDeviceGetMemoryProperties", "zeDeviceGetCommandQueueGroupProperties",
    "zeContextCreate", "zeContextCreateEx", "zeContextDestroy", "zeMemAllocHost", "zeMemAllocDevice", "zeMemFree",
    "zeMemGetAllocProperties", "zeMemGetAddressRange", "zeVirtualMemReserve", "zeVirtualMemFree",
    "zeVirtualMemQueryPageSize", "zeVirtualMemMap", "zeVirtualMemUnmap", "zeVirtualMemSetAccessAttribute",
    "zeVirtualMemGetAccessAttribute", "zePhysicalMemCreate", "zePhysicalMemDestroy", "zeCommandQueueCreate",
    "zeCommandQueueDestroy", "zeCommandQueueExecuteCommandLists", "zeCommandQueueSynchronize",
    "zeCommandListCreate", "zeCommandListCreateImmediate", "zeCommandListDestroy", "zeCommandListClose",
    "zeCommandListReset", "zeCommandListAppendMemoryCopy", "zeCommandListAppendMemoryCopyRegion",
    "zeCommandListAppendBarrier", "zeCommandListAppendSignalEvent", "zeCommandListAppendWaitOnEvents",
    "zeEventPoolCreate", "zeEventPoolDestroy", "zeEventCreate", "zeEventDestroy", "zeEventHostSignal",
    "zeEventHostSynchronize", "zeEventQueryStatus", "zeEventHostReset", "zesDeviceEnumMemoryModules",
    "zesMemoryGetProperties", "zesMemoryGetState"};

using Counts = std::map<std::string, uint64_t>;  // entry point -> calls (entries never called are absent)

// What the sweep needs of a fake beyond DriverControl: its call counters and
// how to say "fail the j-th call of E" in its fault grammar.
struct FakeHooks {
    bool cuda = false;
    uint64_t (*call_count)(const char *entry) = nullptr;  // NULL entry: every call
    std::vector<std::string> entries;
    int64_t code = 0;       // the native code every injected fault returns
    const char *code_name = "";

    Counts counts() const {
        Counts c;
        for (const auto &e : entries)
            if (uint64_t n = call_count(e.c_str())) c[e] = n;
        return c;
    }
    std::string fail_call(const std::string &entry, uint64_t j) const {
        // Both fakes take fail:ENTRY:CODE@K (fakes/README.md).
        return "fail:" + entry + ":" + code_name + "@" + std::to_string(j);
    }
};

bool resolve_hooks(const DriverControl &c, FakeHooks *h, std::string *why) {
    void *lib = dlopen(c.library.c_str(), RTLD_NOW | RTLD_NOLOAD);  // only the driver already loaded
    if (lib) h->call_count = reinterpret_cast<uint64_t (*)(const char *)>(dlsym(lib, "xmc_fake_cuda_call_count"));
    if (h->call_count) {
        h->cuda = true;
        h->entries.assign(std::begin(kCudaEntries), std::end(kCudaEntries));
        h->code = 999;  // CUDA_ERROR_UNKNOWN
        h->code_name = "CUDA_ERROR_UNKNOWN";
        return true;
    }
    if (lib) h->call_count = reinterpret_cast<uint64_t (*)(const char *)>(dlsym(lib, "xmc_fake_ze_call_count"));
    if (h->call_count) {
        h->entries.assign(std::begin(kZeEntries), std::end(kZeEntries));
        h->code = 0x7ffffffe;  // ZE_RESULT_ERROR_UNKNOWN
        h->code_name = "ZE_RESULT_ERROR_UNKNOWN";
        return true;
    }
    *why = "the driver '" + c.library + "' has fault injection but no call counters to sweep with";
    return false;
}

// One driver call to fail: the j-th call of `entry` since the fault script
// was installed, made by the scenario step `step`.
struct Site {
    std::string entry;
    uint64_t j = 0;
    std::string step;
    std::string name() const { return entry + " #" + std::to_string(j) + " in " + step; }
};

// What every run of a scenario shares, in the child process: memory nothing
// else uses, whose pages a scenario registers.
struct Env {
    const xmc_backend *api = nullptr;
    const DriverControl *control = nullptr;
    const FakeHooks *hooks = nullptr;
    int32_t devices = 0;
    char *arena = nullptr;  // arena_pages pages from mmap: 8 per device, at least 32
    size_t arena_pages = 0;
    char *page(size_t i) const { return arena + i * page_size(); }
    bool has(xmc_caps cap) const { return (api->capabilities & cap) == cap; }
};

// ---- one run of a scenario ------------------------------------------------

// One run, on an instance of its own, with at most one injected fault. The
// scenario calls step() before each xmc call and passes every status through
// ok(); failures of the checks are collected in `problems`.
class Run {
public:
    Run(const Env &env, const Site *site) : api(env.api), env_(env), site_(site) {
        env_.control->set_faults(site ? env_.hooks->fail_call(site->entry, site->j).c_str() : "");
        start_ = env_.hooks->counts();
        start_total_ = env_.hooks->call_count(nullptr);
        besides_contexts_ = env_.control->objects_besides_contexts();
        step("open");
        xmc_open_params params{sizeof(xmc_open_params), nullptr};
        const xmc_status st = api->open(&params, &inst);
        if (st != XMC_OK) {
            // No instance carries the detail of a failed open: the status alone.
            if (!fired() || reported_++ > 0)
                problem("open answered " + std::string(xmc_status_string(st)) + " with no fault to report");
            inst = nullptr;
        }
    }

    const xmc_backend *api;
    xmc_instance *inst = nullptr;
    std::vector<std::string> problems;
    // Clean run: the counts when each step began, to attribute calls to steps.
    std::vector<std::pair<std::string, Counts>> marks;
    bool recording = false;

    int64_t code() const { return env_.hooks->code; }
    const Env &env() const { return env_; }

    void step(const std::string &name) {
        step_ = name;
        if (recording) marks.emplace_back(name, env_.hooks->counts());
    }
    void problem(const std::string &what) { problems.push_back("step '" + step_ + "': " + what); }
    void check(bool cond, const std::string &what) {
        if (!cond) problem(what);
    }

    // The injected call has been made by now.
    bool fired() const {
        if (!site_) return false;
        auto it = start_.find(site_->entry);
        const uint64_t before = it == start_.end() ? 0 : it->second;
        return env_.hooks->call_count(site_->entry.c_str()) - before >= site_->j;
    }
    // Whether any xmc call reported the injected fault.
    bool reported() const { return reported_ > 0; }

    // A call's status: true when OK. A failure must be the one injected fault,
    // reported once, as a driver error carrying its code and naming the call.
    bool ok(xmc_status st, const char *call) {
        if (st == XMC_OK) return true;
        xmc_error_info e{};
        api->last_error(inst, &e);
        std::ostringstream got;
        got << call << " answered " << xmc_status_string(st) << " [native " << e.native_code << ", call '" << e.call
            << "'] " << e.message;
        if (!site_) {
            problem(got.str() + " with no fault injected");
        } else if (!fired()) {
            problem(got.str() + " before the injected call was made");
        } else if (reported_++ > 0) {
            problem(got.str() + " after the injected fault was already reported by an earlier call");
        } else if (st != XMC_ERR_DRIVER || e.native_code != code()) {
            problem(got.str() + ": not the injected fault, which is reported as driver_error with native code " +
                    std::to_string(code()));
        } else if (std::strcmp(e.call, call) != 0 || e.message[0] == 0) {
            problem(got.str() + ": the detail must name the call '" + call + "' and say what failed");
        }
        return false;
    }
    // A failure reported in a result instead of a status (pin_alloc's
    // lock-only degradation): counted like ok()'s.
    void reported_in_result(xmc_status st, int64_t native, const char *what) {
        std::ostringstream got;
        got << what << " says " << xmc_status_string(st) << " with native code " << native;
        if (!site_ || !fired()) problem(got.str() + " with no fault injected");
        else if (reported_++ > 0) problem(got.str() + " after the injected fault was already reported");
        else if (st != XMC_ERR_DRIVER || native != code())
            problem(got.str() + ": not the injected fault, which is reported as driver_error with native code " +
                    std::to_string(code()));
    }
    // A call that must succeed: the retry after a reported fault, or a call
    // made after the fault was spent.
    void must_succeed(xmc_status st, const char *call, const char *why) {
        if (st == XMC_OK) return;
        xmc_error_info e{};
        api->last_error(inst, &e);
        problem(std::string(call) + " answered " + xmc_status_string(st) + " [native " + std::to_string(e.native_code) +
                "] " + e.message + " (" + why + ")");
    }

    xmc_reg_info reg_query(const void *p) {
        xmc_reg_info q{};
        if (api->reg_query(inst, p, &q) != XMC_OK) problem("reg_query failed");
        return q;
    }
    bool pinned(const void *p, size_t n) {
        xmc_pin_info q{};
        if (api->pin_query(inst, p, n, &q) != XMC_OK) problem("pin_query failed");
        return q.pinned == 1;
    }

    // Closes the instance. A failed close changes nothing (backend.h), so the
    // instance is still open and a retry must close it.
    void close() {
        if (!inst) return;
        step("close");
        if (!ok(api->close(inst), "close")) must_succeed(api->close(inst), "close", "the retry of a failed close");
        inst = nullptr;
    }

    // Clean run: the steps' call counts are complete (every call the fake
    // counted is a call of a listed entry point).
    void finish_recording() {
        marks.emplace_back("end", env_.hooks->counts());
        uint64_t listed = 0;
        for (const auto &[e, n] : marks.back().second) listed += n - (start_.count(e) ? start_.at(e) : 0);
        const uint64_t total = env_.hooks->call_count(nullptr) - start_total_;
        if (listed != total)
            problems.push_back("the fake counted " + std::to_string(total) + " calls but the sweep's entry points " +
                               "account for " + std::to_string(listed) + ": an entry point is missing from its list");
    }
    const Counts &start() const { return start_; }
    // Driver objects other than contexts are as many as before the run (a
    // failed call may leave the context it created, nothing else).
    void check_nothing_but_contexts(const char *what) {
        const size_t now = env_.control->objects_besides_contexts();
        check(now == besides_contexts_, std::string(what) + " left driver objects behind:\n" +
                                            env_.control->ledger_text());
    }

private:
    const Env &env_;
    const Site *site_;
    std::string step_;
    Counts start_;
    uint64_t start_total_ = 0;
    size_t besides_contexts_ = 0;
    int reported_ = 0;
};

// ---- the scenarios ----------------------------------------------------------
// Each runs on the Run's instance and ends with r.close(). A step that fails
// is followed by the cleanup a careful caller does (and by the checks of the
// state the model allows); the steps after it are skipped.

// Register, query, unregister, on every device (REG-FAIL, REG-UNREG-FAIL).
void register_scenario(Run &r) {
    const Env &env = r.env();
    const size_t n = 4 * page_size();
    for (int32_t d = 0; r.inst && d < env.devices; ++d) {
        char *p = env.page(8 * static_cast<size_t>(d));
        const std::string dev = " dev " + std::to_string(d);
        r.step("reg_register" + dev);
        xmc_reg_info info{};
        if (!r.ok(r.api->reg_register(r.inst, p, n, d, 0, &info), "reg_register")) {
            // REG-FAIL: no tracking entry, and nothing in the driver but contexts.
            r.check(r.reg_query(p).registered == 0, "a rejected registration is tracked");
            r.check_nothing_but_contexts("the rejected registration");
            continue;
        }
        r.check(info.registered == 1 && info.base == p && info.size == n && info.device == d,
                "reg_register answered OK with a wrong result");
        r.step("reg_query" + dev);
        xmc_reg_info q = r.reg_query(p + 1);
        r.check(q.registered == 1 && q.base == p && q.size == n && q.device == d,
                "the registration made is not reported by reg_query");
        r.step("reg_unregister" + dev);
        if (!r.ok(r.api->reg_unregister(r.inst, p), "reg_unregister")) {
            // REG-UNREG-FAIL: still tracked and queryable; a retry removes it.
            q = r.reg_query(p + 1);
            r.check(q.registered == 1 && q.base == p && q.size == n,
                    "after a failed unregister the registration is no longer tracked (the device may still map it)");
            r.must_succeed(r.api->reg_unregister(r.inst, p), "reg_unregister", "the retry after a failed release");
        }
        r.check(r.reg_query(p).registered == 0, "still registered after unregister");
    }
    r.close();
}

// Pin with a device, then free, on every device (PIN-DEVICE).
void pin_scenario(Run &r) {
    const Env &env = r.env();
    const size_t n = 3 * page_size();
    for (int32_t d = 0; r.inst && d < env.devices; ++d) {
        const std::string dev = " dev " + std::to_string(d);
        r.step("pin_alloc" + dev);
        xmc_pin_result res{};
        const xmc_status st = r.api->pin_alloc(r.inst, n, 64, d, &res);
        if (!r.ok(st, "pin_alloc")) {
            r.problem("PIN-DEVICE: when registration fails the allocation still succeeds, lock-only");
            continue;
        }
        if (!res.registered) {
            // Lock-only, never silently: the reason and the driver's code.
            r.reported_in_result(res.reg_status, res.reg_native_code, "pin_alloc's lock-only result");
            r.check_nothing_but_contexts("the failed registration");
        }
        r.check(r.pinned(res.base, res.size), "the block is not reported pinned");
        // Under a sanitizer mlock is a no-op (mlock_ignored_reason): the lock
        // state is unobservable there, and the rest of the sweep still runs.
        if (!mlock_ignored_reason())
            r.check(lock_state(res.base, res.size).all_locked, "the block's pages are not locked");
        r.step("pin_free" + dev);
        if (!r.ok(r.api->pin_free(r.inst, res.base), "pin_free")) {
            // The driver still maps it: the block stays, and a retry frees it.
            r.check(r.pinned(res.base, res.size), "a block whose driver release failed is gone");
            r.must_succeed(r.api->pin_free(r.inst, res.base), "pin_free", "the retry after a failed release");
        }
        r.check(!r.pinned(res.base, 1), "still pinned after pin_free");
    }
    r.close();
}

// A buffer of the copy scenario and the model of its bytes (-1: unknown).
struct CopyBuf {
    xmc_mem_kind kind = XMC_MEM_HOST;
    char *ptr = nullptr;
    size_t bytes = 0;
    std::vector<int> model;
    std::vector<char> host;  // backing of a HOST buffer
};

// The bytes a copy writes, applied to the models (xmc/backend.h's formula).
void model_copy(const xmc_copy_desc &c, const CopyBuf &src, CopyBuf &dst) {
    const size_t so = static_cast<size_t>(static_cast<char *>(c.src.ptr) - src.ptr);
    const size_t to = static_cast<size_t>(static_cast<char *>(c.dst.ptr) - dst.ptr);
    for (size_t z = 0; z < c.depth; ++z)
        for (size_t y = 0; y < c.height; ++y)
            for (size_t x = 0; x < c.width_bytes; ++x)
                dst.model[to + (c.dst.z + z) * c.dst.slice_pitch + (c.dst.y + y) * c.dst.pitch + c.dst.x_bytes + x] =
                    src.model[so + (c.src.z + z) * c.src.slice_pitch + (c.src.y + y) * c.src.pitch + c.src.x_bytes + x];
}

xmc_copy_desc desc(const CopyBuf &src, size_t soff, xmc_copy_side s, const CopyBuf &dst, size_t doff,
                   xmc_copy_side t, size_t w, size_t h, size_t d) {
    s.ptr = src.ptr + soff;
    s.kind = src.kind;
    s.device = 0;
    t.ptr = dst.ptr + doff;
    t.kind = dst.kind;
    t.device = 0;
    return xmc_copy_desc{s, t, w, h, d};
}

// Stream, device memory, 1-D, 2-D and 3-D copies between pinned, registered
// and device memory, synchronize, free, destroy (COPY-STRIDED).
void copy_scenario(Run &r) {
    const Env &env = r.env();
    if (!r.inst) return;
    constexpr size_t kBytes = 16384;
    const xmc_backend *api = r.api;
    // Setup (not swept: the pinning and registration sweeps cover these calls).
    // Without `pin` or `register`, host memory stands in.
    r.step("setup");
    CopyBuf P, Q, R, D;
    for (CopyBuf *b : {&P, &Q}) {
        b->bytes = kBytes;
        if (env.has(XMC_CAP_PIN)) {
            xmc_pin_result res{};
            const int32_t with = env.has(XMC_CAP_PIN_REGISTER) ? 0 : XMC_NO_DEVICE;
            r.must_succeed(api->pin_alloc(r.inst, kBytes, 64, with, &res), "pin_alloc", "setup");
            b->kind = XMC_MEM_PINNED;
            b->ptr = static_cast<char *>(res.base);
        }
    }
    R.bytes = kBytes;
    const size_t r_pages = (kBytes + page_size() - 1) / page_size();  // registered: whole pages of the arena
    if (env.has(XMC_CAP_REGISTER)) {
        xmc_reg_info info{};
        r.must_succeed(api->reg_register(r.inst, env.page(0), r_pages * page_size(), 0, 0, &info), "reg_register",
                       "setup");
        R.kind = XMC_MEM_REGISTERED;
        R.ptr = env.page(0);
    }
    for (CopyBuf *b : {&P, &Q, &R}) {
        if (!b->ptr) {
            b->host.assign(kBytes, 0);
            b->ptr = b->host.data();
        }
        b->model.resize(kBytes);
    }
    for (size_t i = 0; i < kBytes; ++i) {
        P.ptr[i] = static_cast<char>(1 + (i * 131) % 251);
        Q.ptr[i] = static_cast<char>(0xA5 ^ (i * 7));
        R.ptr[i] = static_cast<char>(0x5A ^ (i * 11));
    }
    for (CopyBuf *b : {&P, &Q, &R})
        for (size_t i = 0; i < kBytes; ++i) b->model[i] = static_cast<unsigned char>(b->ptr[i]);
    D.kind = XMC_MEM_DEVICE;
    D.bytes = kBytes;
    D.model.assign(kBytes, -1);

    xmc_stream *s = nullptr;
    r.step("stream_create");
    bool good = r.ok(api->stream_create(r.inst, 0, &s), "stream_create");
    void *dptr = nullptr;
    if (good) {
        r.step("dev_alloc");
        good = r.ok(api->dev_alloc(r.inst, 0, kBytes, &dptr), "dev_alloc");
        D.ptr = static_cast<char *>(dptr);
    }
    // The copies, in order on one stream. Shapes: {x, y, z, pitch, slice}.
    struct Copy {
        const char *step;
        CopyBuf *src;
        size_t soff;
        xmc_copy_side s;
        CopyBuf *dst;
        size_t doff;
        xmc_copy_side t;
        size_t w, h, d;
    };
    const Copy copies[] = {
        {"copy 1-D pinned->device", &P, 0, {nullptr, XMC_MEM_HOST, 0, 0, 0, 0, kBytes, kBytes}, &D, 0,
         {nullptr, XMC_MEM_HOST, 0, 0, 0, 0, kBytes, kBytes}, kBytes, 1, 1},
        {"copy 1-D device->device", &D, 0, {nullptr, XMC_MEM_HOST, 0, 0, 0, 0, 2048, 2048}, &D, 8192,
         {nullptr, XMC_MEM_HOST, 0, 0, 0, 0, 2048, 2048}, 2048, 1, 1},
        {"copy 2-D device->registered", &D, 0, {nullptr, XMC_MEM_HOST, 0, 3, 2, 0, 160, 160 * 9}, &R, 0,
         {nullptr, XMC_MEM_HOST, 0, 5, 1, 0, 256, 256 * 8}, 100, 7, 1},
        {"copy 3-D registered->pinned", &R, 0, {nullptr, XMC_MEM_HOST, 0, 10, 1, 0, 256, 256 * 8}, &Q, 0,
         {nullptr, XMC_MEM_HOST, 0, 2, 0, 1, 64, 64 * 5}, 50, 3, 4},
        // Slice pitches that are not multiples of the pitches (CUDA: one 2-D copy per slice).
        {"copy 3-D device->pinned, uneven slices", &D, 8192, {nullptr, XMC_MEM_HOST, 0, 1, 0, 0, 40, 40 * 2 + 7}, &Q,
         4096, {nullptr, XMC_MEM_HOST, 0, 0, 1, 0, 32, 32 * 3 + 5}, 20, 2, 3},
    };
    for (const Copy &c : copies) {
        if (!good) break;
        r.step(c.step);
        const xmc_copy_desc d = desc(*c.src, c.soff, c.s, *c.dst, c.doff, c.t, c.w, c.h, c.d);
        good = r.ok(api->copy(r.inst, &d, s), "copy");
        if (good) model_copy(d, *c.src, *c.dst);
    }
    if (s) {
        // Also after a failed copy: the copies queued before it must end
        // before their memory is freed.
        r.step("stream_synchronize");
        if (!r.ok(api->stream_synchronize(r.inst, s), "stream_synchronize")) {
            good = false;
            r.must_succeed(api->stream_synchronize(r.inst, s), "stream_synchronize", "the retry after a failed wait");
        }
    }
    if (good) {
        // COPY-STRIDED: exactly the described bytes, nothing else; the source untouched.
        for (const CopyBuf *b : {&P, &Q, &R}) {
            size_t wrong = 0, first = 0;
            for (size_t i = 0; i < kBytes; ++i)
                if (b->model[i] >= 0 && static_cast<unsigned char>(b->ptr[i]) != b->model[i] && wrong++ == 0) first = i;
            r.check(wrong == 0, std::to_string(wrong) + " byte(s) of a " +
                                    (b == &P ? "source" : "destination") + " buffer are wrong after the copies, " +
                                    "the first at offset " + std::to_string(first));
        }
    }
    if (dptr) {
        r.step("dev_free");
        if (!r.ok(api->dev_free(r.inst, dptr), "dev_free"))
            r.must_succeed(api->dev_free(r.inst, dptr), "dev_free", "the retry after a failed free");
    }
    if (s) {
        r.step("stream_destroy");
        if (!r.ok(api->stream_destroy(r.inst, s), "stream_destroy")) {
            // Either the stream is still there and the retry destroys it, or
            // the backend already let it go (the ledger check sees a leak).
            const xmc_status again = api->stream_destroy(r.inst, s);
            if (again != XMC_ERR_INVALID_HANDLE) r.must_succeed(again, "stream_destroy", "the retry after a failed destroy");
        }
    }
    r.step("teardown");
    if (R.kind == XMC_MEM_REGISTERED) r.must_succeed(api->reg_unregister(r.inst, R.ptr), "reg_unregister", "teardown");
    for (CopyBuf *b : {&P, &Q})
        if (b->kind == XMC_MEM_PINNED) r.must_succeed(api->pin_free(r.inst, b->ptr), "pin_free", "teardown");
    r.close();
}

// A full open to close: streams on every device, device memory, an event
// recorded, waited for by another stream and synchronised; then close with
// all of them alive, so close must release them (COPY-ORDER's objects).
void open_close_scenario(Run &r) {
    const Env &env = r.env();
    if (!r.inst) return;
    const xmc_backend *api = r.api;
    std::vector<xmc_stream *> streams;
    r.step("stream_create");
    bool good = true;
    for (int32_t d = 0; good && d <= env.devices; ++d) {  // one per device, and a second one on device 0
        xmc_stream *s = nullptr;
        good = r.ok(api->stream_create(r.inst, d < env.devices ? d : 0, &s), "stream_create");
        if (good) streams.push_back(s);
    }
    r.step("dev_alloc");
    for (int32_t d = 0; good && d < env.devices; ++d) {
        void *p = nullptr;
        good = r.ok(api->dev_alloc(r.inst, d, 4096, &p), "dev_alloc");
    }
    xmc_event *e = nullptr;
    if (good) {
        r.step("event_create");
        good = r.ok(api->event_create(r.inst, 0, &e), "event_create");
    }
    if (good) {
        r.step("event_record");
        good = r.ok(api->event_record(r.inst, e, streams.front()), "event_record");
    }
    if (good) {
        r.step("stream_wait_event");
        good = r.ok(api->stream_wait_event(r.inst, streams.back(), e), "stream_wait_event");
    }
    if (good) {
        r.step("event_synchronize");
        good = r.ok(api->event_synchronize(r.inst, e), "event_synchronize");
    }
    r.close();  // with the streams, the event and the device memory alive
}

struct Scenario {
    const char *name;
    void (*body)(Run &r);
};
const Scenario kRegister{"register", register_scenario};
const Scenario kPin{"pin", pin_scenario};
const Scenario kCopy{"copy", copy_scenario};
const Scenario kOpenClose{"open-close", open_close_scenario};

// ---- the child: sweeping, and reporting line by line -----------------------

constexpr const char *kReportEnv = "XMC_FAULT_SWEEP_REPORT";  // set in the child: where to report
constexpr const char *kFirstEnv = "XMC_FAULT_SWEEP_FIRST";    // the first site the child sweeps

// The report is a file of lines "<kind> <site index> <text>", appended and
// flushed one by one so the parent knows how far a child that died got.
class Report {
public:
    explicit Report(const char *path) : fd_(::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {}
    ~Report() {
        if (fd_ >= 0) ::close(fd_);
    }
    void line(const char *kind, long site, const std::string &text = "") {
        std::string l = std::string(kind) + " " + std::to_string(site) + " ";
        for (char c : text) l += c == '\n' ? std::string("\\n") : c == '\\' ? std::string("\\\\") : std::string(1, c);
        l += "\n";
        if (fd_ >= 0 && ::write(fd_, l.data(), l.size()) < 0) std::perror("fault sweep report");
    }

private:
    int fd_;
};

// What one run left: the problems of its checks, then a clean ledger and a
// backend that tracks nothing. Returns false when the driver or the backend
// keeps something (the next runs could not start clean).
bool finish_run(Run &r, const Env &env, size_t reclaimed_before, std::vector<std::string> *problems) {
    env.control->set_faults("");
    *problems = r.problems;
    bool clean = true;
    if (size_t live = env.control->live_objects(); live != 0) {
        problems->push_back("after close the driver still holds " + std::to_string(live) + " object(s):\n" +
                            env.control->ledger_text());
        clean = false;
    }
    if (env.control->reclaimed_objects) {
        if (size_t n = env.control->reclaimed_objects() - reclaimed_before; n != 0)
            problems->push_back(std::to_string(n) + " object(s) the backend did not release were freed only " +
                                "with their context (a leak while any other instance keeps the context)");
    }
    // The backend's own records, through a fresh instance (no driver call).
    xmc_instance *probe = nullptr;
    xmc_open_params params{sizeof(xmc_open_params), nullptr};
    if (env.api->open(&params, &probe) != XMC_OK) {
        problems->push_back("open after the run failed");
        return false;
    }
    for (size_t i = 0; i < env.arena_pages; ++i) {
        xmc_reg_info q{};
        if (env.api->reg_query(probe, env.page(i), &q) == XMC_OK && q.registered) {
            problems->push_back("the backend still tracks a registration at arena page " + std::to_string(i));
            clean = false;
            break;
        }
    }
    xmc_pin_stats ps{};
    if (env.has(XMC_CAP_PIN) && env.api->pin_stats(probe, &ps) == XMC_OK && ps.blocks_now != 0) {
        problems->push_back("the backend still holds " + std::to_string(ps.blocks_now) + " pinned block(s)");
        clean = false;
    }
    env.api->close(probe);
    return clean;
}

// Runs in the child: the clean run, then one run per site from `first` on.
void child_sweep(const Env &env, const Scenario &sc, const std::set<std::string> &swept, Report &out, long first) {
    if (size_t live = env.control->live_objects(); live != 0) {
        out.line("fail", -1, "the driver holds " + std::to_string(live) + " object(s) before the sweep:\n" +
                                 env.control->ledger_text());
        return;
    }
    // 1. The clean run: its calls, step by step.
    std::vector<Site> sites;
    {
        const size_t reclaimed = env.control->reclaimed_objects ? env.control->reclaimed_objects() : 0;
        Run r(env, nullptr);
        r.recording = true;
        sc.body(r);
        r.finish_recording();
        std::vector<std::string> problems;
        const bool clean = finish_run(r, env, reclaimed, &problems);
        for (const auto &p : problems) out.line("fail", -1, "the run without a fault: " + p);
        if (!problems.empty() || !clean) return;
        for (size_t k = 0; k + 1 < r.marks.size(); ++k) {
            const std::string &step = r.marks[k].first;
            if (!swept.count(step.substr(0, step.find(' ')))) continue;  // the ABI call names the step
            for (const auto &[entry, after] : r.marks[k + 1].second) {
                const auto &at = r.marks[k].second;
                const uint64_t from = at.count(entry) ? at.at(entry) : 0;
                const uint64_t base = r.start().count(entry) ? r.start().at(entry) : 0;
                for (uint64_t n = from + 1; n <= after; ++n) sites.push_back(Site{entry, n - base, step});
            }
        }
    }
    out.line("sites", static_cast<long>(sites.size()));
    // 2. One run per site.
    for (long i = first; i < static_cast<long>(sites.size()); ++i) {
        const Site &site = sites[static_cast<size_t>(i)];
        out.line("site", i, site.name());
        const size_t reclaimed = env.control->reclaimed_objects ? env.control->reclaimed_objects() : 0;
        Run r(env, &site);
        sc.body(r);
        if (!r.fired()) r.problem("the injected call was never made: the run took another path than the clean run");
        const bool recovered = r.fired() && !r.reported();
        std::vector<std::string> problems;
        const bool clean = finish_run(r, env, reclaimed, &problems);
        for (const auto &p : problems)
            out.line("fail", i, site.name() + (recovered ? " (no call reported it)" : "") + ": " + p);
        if (recovered && problems.empty()) out.line("recovered", i, site.name());
        out.line("end", i);
        if (!clean) {
            out.line("dirty", i);  // the parent goes on from the next site in a fresh process
            std::_Exit(3);
        }
    }
    out.line("done", 0);
}

// ---- the parent: the child processes, crashes and hangs ---------------------

struct SweepOutcome {
    long sites = -1;
    std::vector<std::string> failures;
    std::vector<std::string> recovered;
};

std::string unescape(const std::string &s) {
    std::string o;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 1 < s.size()) {
            o += s[i + 1] == 'n' ? '\n' : s[i + 1];
            ++i;
        } else {
            o += s[i];
        }
    }
    return o;
}

// The end of the child's output, without gtest's own banner lines; "" if
// nothing else is there.
std::string tail_of(const std::string &path, size_t n) {
    std::ifstream in(path);
    std::string s;
    for (std::string line; std::getline(in, line);)
        if (!line.empty() && line.rfind("Note: Google Test filter", 0) != 0 && line.rfind("[==", 0) != 0 &&
            line.rfind("[--", 0) != 0 && line.rfind("[ RUN", 0) != 0)
            s += line + "\n";
    return s.size() > n ? "..." + s.substr(s.size() - n) : s;
}

// Runs the sweep in children of this binary until every site is swept.
SweepOutcome parent_sweep(const std::string &backend, const std::string &test) {
    constexpr auto kNoProgress = std::chrono::seconds(5);  // a site is milliseconds; this is a hang
    constexpr int kMaxChildren = 64;
    SweepOutcome o;
    char dir[] = "/tmp/xmc-fault-sweep-XXXXXX";
    if (!mkdtemp(dir)) {
        o.failures.push_back("cannot create a temporary directory for the sweep's report");
        return o;
    }
    const std::string report = std::string(dir) + "/report", log = std::string(dir) + "/child.log";
    long first = 0;
    for (int child = 0; child < kMaxChildren; ++child) {
        // The environment and arguments are built before fork: the child only
        // execs. gtest's own variables stay out (a shard setting would skip
        // the one test the child runs).
        std::vector<std::string> env_strings;
        for (char **e = environ; *e; ++e)
            if (std::strncmp(*e, "XMC_FAULT_SWEEP_", 16) != 0 && std::strncmp(*e, "GTEST_", 6) != 0)
                env_strings.push_back(*e);
        env_strings.push_back(std::string(kReportEnv) + "=" + report);
        env_strings.push_back(std::string(kFirstEnv) + "=" + std::to_string(first));
        std::vector<std::string> args = {"xmc", "run", "--backend", backend, "--gtest_filter=" + test};
        std::vector<char *> envp, argv;
        for (auto &s : env_strings) envp.push_back(s.data());
        for (auto &s : args) argv.push_back(s.data());
        envp.push_back(nullptr);
        argv.push_back(nullptr);
        ::unlink(report.c_str());
        const int logfd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        const pid_t pid = fork();
        if (pid == 0) {
            if (logfd >= 0) {
                dup2(logfd, 1);
                dup2(logfd, 2);
            }
            execve("/proc/self/exe", argv.data(), envp.data());
            _exit(127);
        }
        if (logfd >= 0) ::close(logfd);
        if (pid < 0) {
            o.failures.push_back("fork failed");
            break;
        }
        // Follow the report while the child runs; a child without progress is killed.
        long running = -1;
        std::string running_name, pending;
        bool done = false, hung = false;
        long dirty_at = -1;  // a run that left something behind: the child stopped after it
        size_t offset = 0;
        auto last = std::chrono::steady_clock::now();
        int status = 0;
        auto read_report = [&] {
            std::ifstream in(report);
            if (!in) return;
            in.seekg(static_cast<std::streamoff>(offset));
            std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            offset += chunk.size();
            pending += chunk;
            for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
                const std::string line = pending.substr(0, nl);
                pending.erase(0, nl + 1);
                last = std::chrono::steady_clock::now();
                std::istringstream ls(line);
                std::string kind;
                long site = 0;
                ls >> kind >> site;
                std::string text;
                std::getline(ls, text);
                if (!text.empty() && text[0] == ' ') text.erase(0, 1);
                text = unescape(text);
                if (kind == "sites") o.sites = site;
                else if (kind == "site") { running = site; running_name = text; }
                else if (kind == "end") running = -1;
                else if (kind == "fail") o.failures.push_back(site < 0 ? text : "site " + std::to_string(site) + ": " + text);
                else if (kind == "recovered") o.recovered.push_back(text);
                else if (kind == "dirty") dirty_at = site;
                else if (kind == "done") done = true;
            }
        };
        for (;;) {
            const pid_t w = waitpid(pid, &status, WNOHANG);
            read_report();
            if (w == pid) break;
            if (std::chrono::steady_clock::now() - last > kNoProgress) {
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                read_report();
                hung = true;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        if (done) break;
        std::string how = hung ? "hung (no progress for 5 s)"
                          : WIFSIGNALED(status) ? std::string("crashed: ") + strsignal(WTERMSIG(status))
                                                : "exited with status " + std::to_string(WEXITSTATUS(status));
        if (running >= 0) {
            const std::string tail = tail_of(log, 1500);
            o.failures.push_back("site " + std::to_string(running) + ": " + running_name + ": the run " + how +
                                 (tail.empty() ? "" : "; the child's output ends:\n" + tail));
            first = running + 1;
        } else if (dirty_at >= 0) {
            first = dirty_at + 1;  // its failure is reported; go on after it
        } else {
            if (o.failures.empty())
                o.failures.push_back("the sweep's child process " + how + " before sweeping; its output ends:\n" +
                                     tail_of(log, 1500));
            break;
        }
        if (o.sites >= 0 && first >= o.sites) break;
        if (child + 1 == kMaxChildren) o.failures.push_back("gave up after " + std::to_string(kMaxChildren) + " child processes");
    }
    ::unlink(report.c_str());
    ::unlink(log.c_str());
    ::rmdir(dir);
    return o;
}

// ---- the tests ---------------------------------------------------------------

class FaultSweep : public BackendTest {
protected:
    void SetUp() override {
        BackendTest::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        std::string why;
        control_ = driver_control(api, &why);
        if (!control_) XMC_SKIP(SkipKind::Unsupported, why);
        if (!resolve_hooks(*control_, &hooks_, &why)) XMC_SKIP(SkipKind::Unsupported, why);
        ASSERT_EQ(api->device_count(inst, &devices_), XMC_OK) << last_error();
        if (devices_ == 0) XMC_SKIP(SkipKind::NoDevice, "backend '" << api->name << "' reports no device");
    }

    // Sweeps the sites of the steps named by `swept` (their ABI calls).
    void sweep(const Scenario &sc, const std::set<std::string> &swept) {
        if (const char *report = std::getenv(kReportEnv)) {
            // The child: no instance may stay open, so that contexts are
            // created and released inside every run.
            EXPECT_EQ(api->close(inst), XMC_OK);
            inst = nullptr;
            Env env;
            env.api = api;
            env.control = control_;
            env.hooks = &hooks_;
            env.devices = devices_;
            env.arena_pages = 8 * static_cast<size_t>(std::max<int32_t>(devices_, 4));
            void *arena = mmap(nullptr, env.arena_pages * page_size(), PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            ASSERT_NE(arena, MAP_FAILED);
            env.arena = static_cast<char *>(arena);
            Report out(report);
            const char *first = std::getenv(kFirstEnv);
            child_sweep(env, sc, swept, out, first ? std::atol(first) : 0);
            munmap(arena, env.arena_pages * page_size());
            return;
        }
        const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
        const std::string test = std::string(info->test_suite_name()) + "." + info->name();
        const SweepOutcome o = parent_sweep(GetParam(), test);
        std::string steps;
        for (const auto &s : swept) steps += (steps.empty() ? "" : ",") + s;
        RecordProperty("fault_sweep_sites", static_cast<int>(o.sites));
        std::printf("fault sweep: %s %s (%s): %ld sites\n", api->name, sc.name, steps.c_str(), o.sites);
        if (!o.recovered.empty()) {
            std::printf("fault sweep: %s %s: %zu site(s) recovered without reporting an error:\n", api->name, sc.name,
                        o.recovered.size());
            for (const auto &r : o.recovered) std::printf("  %s\n", r.c_str());
        }
        std::fflush(stdout);
        EXPECT_GT(o.sites, 0) << "the scenario made no driver call in the swept steps (" << steps << ")";
        constexpr size_t kShown = 25;
        for (size_t i = 0; i < o.failures.size() && i < kShown; ++i) ADD_FAILURE() << "fault sweep: " << o.failures[i];
        if (o.failures.size() > kShown) ADD_FAILURE() << "fault sweep: and " << o.failures.size() - kShown << " more";
    }

    const DriverControl *control_ = nullptr;
    FakeHooks hooks_;
    int32_t devices_ = 0;
};

TEST_P(FaultSweep, REG_FAIL_FaultSweepOfRegisterLeavesNothingBehind) {
    sweep(kRegister, {"reg_register"});
}

TEST_P(FaultSweep, REG_UNREG_FAIL_FaultSweepOfUnregisterReportsAndKeeps) {
    sweep(kRegister, {"reg_unregister"});
}

TEST_P(FaultSweep, PIN_DEVICE_FaultSweepDegradesWithTheCodeAndLeavesNothing) {
    sweep(kPin, {"pin_alloc", "pin_free"});
}

TEST_P(FaultSweep, COPY_STRIDED_FaultSweepOfStreamsAndCopiesLeavesNothing) {
    sweep(kCopy, {"stream_create", "dev_alloc", "copy", "stream_synchronize", "dev_free", "stream_destroy"});
}

TEST_P(FaultSweep, COPY_ORDER_FaultSweepOpenToCloseLeavesNothing) {
    sweep(kOpenClose, {"open", "event_create", "event_record", "stream_wait_event", "event_synchronize", "close"});
}

XMC_INSTANTIATE_FOR_BACKENDS(FaultSweep);

} // namespace
} // namespace xmc::conformance
