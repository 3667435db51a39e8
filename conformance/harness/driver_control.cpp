#include "driver_control.hpp"
#include "driver_control_ze.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

namespace xmc::conformance {

std::string DriverControl::ledger_text() const {
    if (!ledger) return "";
    std::vector<char> buf(ledger(nullptr, 0) + 1);
    ledger(buf.data(), buf.size());
    return buf.data();
}

size_t DriverControl::objects_besides_contexts() const {
    // One object per ledger line; the fake's own header and released physical
    // handles (freed with their last mapping) are not live objects.
    size_t n = 0;
    const std::string text = ledger_text();
    for (size_t at = 0; at < text.size();) {
        size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(at, end - at);
        at = end + 1;
        if (line.empty() || line.rfind("live objects:", 0) == 0 || line.rfind("context ", 0) == 0 ||
            line.find(": released,") != std::string::npos)
            continue;
        ++n;
    }
    return n;
}

namespace {

// Function types of the two driver entry points the suite calls itself, to
// learn a device's UUID (cuda.h is not needed for that).
using CuDeviceGet = int (*)(int *device, int ordinal);
using CuDeviceGetUuid = int (*)(unsigned char uuid[16], int device);

// "registration 0x<base>, <n> bytes, flags 0x<f>, device <ordinal>, context ..." in the ledger.
bool cuda_registration_uuid(const DriverControl &c, const void *base, uint8_t uuid[16], std::string *why) {
    char key[64];
    std::snprintf(key, sizeof key, "registration 0x%llx,",
                  static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(base)));
    const std::string ledger = c.ledger_text();
    const size_t at = ledger.find(key);
    const size_t dev = at == std::string::npos ? at : ledger.find(", device ", at);
    if (dev == std::string::npos || dev > ledger.find('\n', at)) {
        *why = std::string("the driver holds no registration at ") + key + " ledger:\n" + ledger;
        return false;
    }
    const int ordinal = std::atoi(ledger.c_str() + dev + 9);
    void *h = dlopen(c.library.c_str(), RTLD_NOW | RTLD_NOLOAD);
    auto get = h ? reinterpret_cast<CuDeviceGet>(dlsym(h, "cuDeviceGet")) : nullptr;
    auto get_uuid = h ? reinterpret_cast<CuDeviceGetUuid>(dlsym(h, "cuDeviceGetUuid_v2")) : nullptr;
    int device = 0;
    if (!get || !get_uuid || get(&device, ordinal) != 0 || get_uuid(uuid, device) != 0) {
        *why = "cannot ask the driver for the UUID of device ordinal " + std::to_string(ordinal);
        return false;
    }
    return true;
}

template <class F>
bool resolve(void *h, const char *name, F *out) {
    *out = reinterpret_cast<F>(dlsym(h, name));
    return *out != nullptr;
}

// xmc_fake_cuda_call_record (fake_cuda_control.h), so the harness needs no fake header.
struct CudaCallRecord {
    char entry[48];
    int64_t tid;
    uint8_t in_host_callback;
    uint8_t on_callback_thread;
};
using CudaCallRecords = size_t (*)(CudaCallRecord *out, size_t n);
CudaCallRecords g_cuda_records = nullptr;
void (*g_cuda_reset_records)() = nullptr;
size_t (*g_cuda_last_error)(char *buf, size_t n) = nullptr;

bool cuda_calls(std::vector<DriverCall> *out, std::string *why) {
    std::vector<CudaCallRecord> recs(g_cuda_records(nullptr, 0) + 16);
    const size_t seen = g_cuda_records(recs.data(), recs.size());
    out->clear();
    for (size_t i = 0; i < seen && i < recs.size(); ++i)
        out->push_back(DriverCall{recs[i].entry, recs[i].tid, recs[i].in_host_callback != 0});
    if (seen > out->size() || out->size() >= 65536) {  // XMC_FAKE_CUDA_CALL_RECORDS
        *why = "the fake kept " + std::to_string(out->size()) + " of " + std::to_string(seen) + " call records";
        return false;
    }
    return true;
}

// Straight from the driver the backend loaded, in the device's primary context (retained for the
// allocation's life, as a framework's allocator keeps its context).
struct CudaRaw {
    int (*device_get)(int *, int) = nullptr;
    int (*retain)(void **, int) = nullptr;
    int (*release)(int) = nullptr;
    int (*push)(void *) = nullptr;
    int (*pop)(void **) = nullptr;
    int (*alloc)(unsigned long long *, size_t) = nullptr;
    int (*free)(unsigned long long) = nullptr;
    std::mutex mu;
    std::map<void *, int> device_of;  // live allocations
} g_cuda_raw;

bool cuda_driver_alloc(int ordinal, size_t bytes, void **out) {
    CudaRaw &r = g_cuda_raw;
    int dev = 0;
    void *ctx = nullptr, *popped = nullptr;
    unsigned long long p = 0;
    if (r.device_get(&dev, ordinal) != 0 || r.retain(&ctx, dev) != 0) return false;
    const bool ok = r.push(ctx) == 0 && r.alloc(&p, bytes) == 0;
    r.pop(&popped);
    if (!ok) {
        r.release(dev);
        return false;
    }
    std::lock_guard<std::mutex> lk(r.mu);
    *out = reinterpret_cast<void *>(static_cast<uintptr_t>(p));
    r.device_of[*out] = dev;
    return true;
}

bool cuda_driver_free(void *p) {
    CudaRaw &r = g_cuda_raw;
    int dev = 0;
    {
        std::lock_guard<std::mutex> lk(r.mu);
        auto it = r.device_of.find(p);
        if (it == r.device_of.end()) return false;
        dev = it->second;
        r.device_of.erase(it);
    }
    const bool ok = r.free(static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p))) == 0;
    return r.release(dev) == 0 && ok;
}

std::string cuda_config_error() {
    char buf[512] = "";
    g_cuda_last_error(buf, sizeof buf);
    return buf;
}

// The CUDA backend loads the library named by XMC_CUDA_DRIVER (default
// libcuda.so.1); the fake CUDA driver exports xmc_fake_cuda_* next to it.
bool cuda_control(DriverControl *c, std::string *why) {
    const char *env = std::getenv("XMC_CUDA_DRIVER");
    c->library = env && *env ? env : "libcuda.so.1";
    // RTLD_NOLOAD: only the library the backend already loaded, never another. And dlsym on that
    // handle, never RTLD_DEFAULT: under the interposer (fakes/cuda_interpose) the fake it may
    // forward to exports the same xmc_fake_cuda_* names, and the interposer's are the ones to use.
    void *h = dlopen(c->library.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (!h) {
        *why = "backend 'cuda' has no driver loaded from '" + c->library + "', so no fault injection";
        return false;
    }
    if (!resolve(h, "xmc_fake_cuda_set_faults", &c->set_faults) ||
        !resolve(h, "xmc_fake_cuda_live_objects", &c->live_objects) ||
        !resolve(h, "xmc_fake_cuda_reclaimed_objects", &c->reclaimed_objects) ||
        !resolve(h, "xmc_fake_cuda_ledger", &c->ledger) || !resolve(h, "xmc_fake_cuda_call_records", &g_cuda_records) ||
        !resolve(h, "xmc_fake_cuda_reset_call_records", &g_cuda_reset_records) ||
        !resolve(h, "xmc_fake_cuda_last_error", &g_cuda_last_error)) {
        *why = "backend 'cuda' runs on '" + c->library + "', a driver without the fake's fault injection" +
               " (a real driver has it through fakes/cuda_interpose: XMC_CUDA_DRIVER=libxmc_cuda_interpose.so)";
        return false;
    }
    resolve(h, "xmc_fake_cuda_second_releases", &c->second_releases);
    resolve(h, "xmc_cuda_interpose_mark", &c->mark);
    c->reject_register = "fail:cuMemHostRegister:CUDA_ERROR_OUT_OF_MEMORY";
    c->reject_register_code = 2;
    c->register_entry = "cuMemHostRegister";
    c->delay_next_copy = "exec_delay:cuMemcpy2DAsync:150ms@1";  // copy.cpp: 1-D host<->device
    c->reject_register_name = "CUDA_ERROR_OUT_OF_MEMORY";
    c->fail_next_unregister = "fail:cuMemHostUnregister:CUDA_ERROR_UNKNOWN@1";
    c->fail_unregister_code = 999;
    c->nonidentity_register = "nonidentity:cuMemHostRegister:0x10000";
    c->unsupported_register = "fail:cuMemHostRegister:CUDA_ERROR_NOT_SUPPORTED";
    c->registration_uuid = cuda_registration_uuid;
    c->calls = cuda_calls;
    c->reset_calls = g_cuda_reset_records;
    c->config_error = cuda_config_error;
    CudaRaw &r = g_cuda_raw;
    if (resolve(h, "cuDeviceGet", &r.device_get) && resolve(h, "cuDevicePrimaryCtxRetain", &r.retain) &&
        resolve(h, "cuDevicePrimaryCtxRelease_v2", &r.release) && resolve(h, "cuCtxPushCurrent_v2", &r.push) &&
        resolve(h, "cuCtxPopCurrent_v2", &r.pop) && resolve(h, "cuMemAlloc_v2", &r.alloc) &&
        resolve(h, "cuMemFree_v2", &r.free))
        c->driver_alloc = cuda_driver_alloc, c->driver_free = cuda_driver_free;
    return true;
}

} // namespace

const DriverControl *driver_control(const xmc_backend *api, std::string *why) {
    static std::mutex mu;
    static std::map<std::string, DriverControl> found;  // by backend name
    std::lock_guard<std::mutex> lock(mu);
    const std::string name = api && api->name ? api->name : "";
    if (auto it = found.find(name); it != found.end()) return &it->second;
    DriverControl c;
    std::string reason = "backend '" + name + "' has no driver fault injection";
    bool ok = false;
    // The in-tree CUDA backend and its broken variants of the self-test ("broken_cuda_*").
    if (name == "cuda" || name.rfind("broken_cuda_", 0) == 0) ok = cuda_control(&c, &reason);
    else if (ze_backend(name)) ok = ze_control(&c, name, &reason);
    if (!ok) {
        if (why) *why = reason;
        return nullptr;
    }
    return &(found[name] = c);
}

} // namespace xmc::conformance
