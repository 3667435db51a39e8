// xmc_cuda_interpose_cost: what the interposer adds to one driver call when no fault is scripted
// (issue 28: within 1% of xmc bench's figures). `xmc bench` run straight and through it tells the
// sum over a row, in figures that vary by more than 1% from run to run; this tells the part that
// is the interposer's, per call, in one process: the same entry points called on the driver itself
// and through the interposer (both open here, the interposer over the same library), in turns,
// each timed over many calls. A row's cost is then its driver calls times the added time, over the
// row's time.
//   xmc_cuda_interpose_cost [--interposer PATH] [--real PATH] [--calls N] [--reps N]
// --real defaults to libcuda.so.1 (a GPU); the fake driver's path runs it anywhere. With
// `--watcher`, a second thread polls cuEventQuery through the interposer throughout, as the CUDA
// backend's slot watcher does while a slot request is pending (the case a lock shared by every
// call made slow). It also checks that the interposer counted every call made through it (its
// counters are lock-free): exit 1 when not.
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Api {
    void* lib = nullptr;
    CUresult (*cuInit)(unsigned) = nullptr;
    CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
    CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
    CUresult (*cuCtxPushCurrent)(CUcontext) = nullptr;
    CUresult (*cuCtxPopCurrent)(CUcontext*) = nullptr;
    CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
    CUresult (*cuStreamQuery)(CUstream) = nullptr;
    CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
    CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
    CUresult (*cuEventQuery)(CUevent) = nullptr;
    CUresult (*cuEventSynchronize)(CUevent) = nullptr;
    CUresult (*cuMemHostRegister)(void*, size_t, unsigned) = nullptr;
    CUresult (*cuMemHostUnregister)(void*) = nullptr;
    bool load(const char* path, std::string& why) {
        lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (lib == nullptr) {
            why = std::string("dlopen(") + path + "): " + dlerror();
            return false;
        }
        bool ok = true;
        auto sym = [&](auto& fn, const char* name) {
            *reinterpret_cast<void**>(&fn) = dlsym(lib, name);
            if (fn == nullptr) {
                why += std::string(why.empty() ? "" : ", ") + path + " lacks " + name;
                ok = false;
            }
        };
        sym(cuInit, "cuInit");
        sym(cuDeviceGet, "cuDeviceGet");
        sym(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
        sym(cuCtxSetCurrent, "cuCtxSetCurrent");
        sym(cuCtxPushCurrent, "cuCtxPushCurrent_v2");
        sym(cuCtxPopCurrent, "cuCtxPopCurrent_v2");
        sym(cuStreamCreate, "cuStreamCreate");
        sym(cuStreamQuery, "cuStreamQuery");
        sym(cuEventCreate, "cuEventCreate");
        sym(cuEventRecord, "cuEventRecord");
        sym(cuEventQuery, "cuEventQuery");
        sym(cuEventSynchronize, "cuEventSynchronize");
        sym(cuMemHostRegister, "cuMemHostRegister_v2");
        sym(cuMemHostUnregister, "cuMemHostUnregister");
        return ok;
    }
};

double now_ns() {
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

void fail(const char* what, CUresult r) {
    std::fprintf(stderr, "xmc_cuda_interpose_cost: %s failed: CUresult %d\n", what, static_cast<int>(r));
    std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
    std::string ip_path, real_path = "libcuda.so.1";
    int calls = 20000, reps = 21;
    bool watcher = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto val = [&]() -> const char* {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "xmc_cuda_interpose_cost: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--interposer") ip_path = val();
        else if (a == "--real") real_path = val();
        else if (a == "--calls") calls = std::max(1, std::atoi(val()));
        else if (a == "--reps") reps = std::max(1, std::atoi(val()));
        else if (a == "--watcher") watcher = true;
        else {
            std::fprintf(stderr,
                         "usage: xmc_cuda_interpose_cost [--interposer PATH] [--real PATH] [--calls N] [--reps N] "
                         "[--watcher]\n");
            return 2;
        }
    }
    if (ip_path.empty()) {  // beside the binary, as the gpu-carry layout has it: bin/ and lib/
        char self[4096] = {};
        const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string(".");
        dir = dir.substr(0, dir.rfind('/'));
        ip_path = dir + "/../lib/libxmc_cuda_interpose.so";
    }
    setenv("XMC_CUDA_INTERPOSE_REAL", real_path.c_str(), 1);
    Api raw, ip;
    std::string why;
    if (!raw.load(real_path.c_str(), why)) {
        std::printf("xmc_cuda_interpose_cost: skipped: no driver: %s\n", why.c_str());
        return 77;
    }
    if (!ip.load(ip_path.c_str(), why)) {
        std::fprintf(stderr, "xmc_cuda_interpose_cost: %s\n", why.c_str());
        return 2;
    }
    auto count = reinterpret_cast<uint64_t (*)(const char*)>(dlsym(ip.lib, "xmc_fake_cuda_call_count"));
    if (count == nullptr) {
        std::fprintf(stderr, "xmc_cuda_interpose_cost: %s has no xmc_fake_cuda_call_count\n", ip_path.c_str());
        return 2;
    }
    CUresult r = raw.cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE) {
        std::printf("xmc_cuda_interpose_cost: skipped: %s has no device\n", real_path.c_str());
        return 77;
    }
    if (r != CUDA_SUCCESS) fail("cuInit", r);
    CUdevice dev = 0;
    CUcontext ctx = nullptr;
    CUstream s = nullptr;
    CUevent ev = nullptr;
    if ((r = raw.cuDeviceGet(&dev, 0)) != CUDA_SUCCESS) fail("cuDeviceGet", r);
    if ((r = raw.cuDevicePrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS) fail("cuDevicePrimaryCtxRetain", r);
    if ((r = raw.cuCtxSetCurrent(ctx)) != CUDA_SUCCESS) fail("cuCtxSetCurrent", r);
    if ((r = raw.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) fail("cuStreamCreate", r);
    if ((r = raw.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) fail("cuEventCreate", r);
    if ((r = raw.cuEventRecord(ev, s)) != CUDA_SUCCESS) fail("cuEventRecord", r);
    if ((r = raw.cuEventSynchronize(ev)) != CUDA_SUCCESS) fail("cuEventSynchronize", r);
    void* page = std::aligned_alloc(4096, 4096);
    std::memset(page, 1, 4096);

    // Each case: one operation of `per` driver calls, timed `calls` times (register: a tenth).
    struct Case {
        const char* name;
        int per, scale;
        std::function<CUresult(Api&)> op;
    };
    const Case cases[] = {
        {"cuCtxPushCurrent+cuCtxPopCurrent", 2, 1,
         [&](Api& a) {
             CUcontext c = nullptr;
             CUresult e = a.cuCtxPushCurrent(ctx);
             return e != CUDA_SUCCESS ? e : a.cuCtxPopCurrent(&c);
         }},
        {"cuEventQuery (done)", 1, 1, [&](Api& a) { return a.cuEventQuery(ev); }},
        {"cuStreamQuery (idle)", 1, 1, [&](Api& a) { return a.cuStreamQuery(s); }},
        {"cuMemHostRegister+cuMemHostUnregister 4 KiB (the ledger's path)", 2, 10,
         [&](Api& a) {
             CUresult e = a.cuMemHostRegister(page, 4096, 0);
             return e != CUDA_SUCCESS ? e : a.cuMemHostUnregister(page);
         }},
    };

    // Read before the poller starts: it may call many times before this thread runs again (CI,
    // two loaded cores: 2,296 of its calls fell before a later read and showed as "uncounted").
    const uint64_t before = count(nullptr);
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> polls{0};
    std::thread poller;
    if (watcher)
        poller = std::thread([&] {
            ip.cuCtxSetCurrent(ctx);  // counted: one call more
            polls.fetch_add(1, std::memory_order_relaxed);
            while (!stop.load(std::memory_order_relaxed)) {
                ip.cuEventQuery(ev);
                polls.fetch_add(1, std::memory_order_relaxed);
            }
        });
    uint64_t made = 0;  // calls made through the interposer by this thread
    std::printf("xmc_cuda_interpose_cost: %s over %s, %d reps, %s\n", ip_path.c_str(), real_path.c_str(), reps,
                watcher ? "a second thread polling cuEventQuery through the interposer throughout"
                        : "no other thread calling");
    std::printf("%-62s %12s %12s %12s\n", "operation", "straight ns", "through ns", "added ns/call");
    int rc = 0;
    for (const Case& c : cases) {
        const int n = std::max(1, calls / c.scale);
        std::vector<double> straight, through, added;
        for (int rep = 0; rep < reps + 1; ++rep) {  // rep 0 warms up
            double t[2] = {0, 0};
            for (int k = 0; k < 2; ++k) {
                const bool via = (k == 0) == (rep % 2 == 1);  // which goes first alternates
                Api& a = via ? ip : raw;
                const double t0 = now_ns();
                for (int i = 0; i < n; ++i)
                    if ((r = c.op(a)) != CUDA_SUCCESS) fail(c.name, r);
                t[via ? 1 : 0] = (now_ns() - t0) / n;
                if (via) made += static_cast<uint64_t>(n) * static_cast<uint64_t>(c.per);
            }
            if (rep == 0) continue;
            straight.push_back(t[0]);
            through.push_back(t[1]);
            added.push_back((t[1] - t[0]) / c.per);
        }
        std::printf("%-62s %12.1f %12.1f %12.1f\n", c.name, median(straight), median(through), median(added));
    }
    stop = true;
    if (poller.joinable()) poller.join();
    const uint64_t counted = count(nullptr) - before;
    const uint64_t expected = made + polls.load();
    std::printf("xmc_cuda_interpose_cost: the interposer counted %llu calls of the %llu made through it%s\n",
                static_cast<unsigned long long>(counted), static_cast<unsigned long long>(expected),
                watcher ? " (both threads)" : "");
    if (counted != expected) rc = 1;
    std::free(page);
    return rc;
}
