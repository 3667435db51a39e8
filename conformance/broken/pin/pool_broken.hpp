// Broken pinned pools for the self-test (SPEC 6). A caching pool of pinned
// blocks, written the way frameworks' pinned allocators are (PyTorch's
// CachingHostAllocator: a block its owner frees goes to a free list, still
// pinned, and is handed out again to the next request of its size; the free
// list is emptied on request), pinning either with mlock (over the host
// backend) or through the fake CUDA driver with cuMemHostRegister (over the
// CUDA backend, as that allocator's cudaHostRegister mode does: capability
// pin_driver). The reference has no pool, so the pool is here, plainly, with
// the places where the pool bugs of the seeds' classes sit made parameters
// (Bugs). A `*_control.cpp` plants none: the suite must pass it, so what the
// bug files fail is the bug's, not the pool's.
//
// Use: in plant(), `plant_bug(t, Method::..., &Bugs::x);` (a control: `use_pool(t, Method::..., true);`).
#pragma once
#include "errors.hpp"
#include "pin_registry.hpp"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace xmc::broken_pool {

enum class Method {
    Mlock,       // posix_memalign + mlock, as the reference
    CudaDriver,  // posix_memalign + cuMemHostRegister through $XMC_CUDA_DRIVER (pin_driver)
};

// Where each bug sits; all false is the correct pool.
struct Bugs {
    // PIN-POOL: a large block (1 MiB and up) handed out from the free list
    // is not taken off it, so the next request of its size gets it too.
    bool large_handout_stays_listed = false;
    // PIN-POOL: pin_pool_release walks the free list but one short: the
    // newest block leaves the list and the accounting, and stays pinned.
    bool release_misses_newest = false;
    // PIN-POOL (driver): pin_pool_release frees each block's memory without
    // cuMemHostUnregister: the driver keeps the pages pinned.
    bool release_skips_unregister = false;
    // Query answers an address no live block holds from a table of what the
    // driver pinned, filled at allocation and never cleared: a block the
    // driver released still reports pinned.
    bool query_trusts_stale_table = false;
    // PIN-FAIL-CLEAN: a refused pinning leaves the buffer it had allocated
    // (CachingHostAllocator's malloc before cudaHostRegister, lost when the
    // registration throws).
    bool leak_on_refused_pinning = false;
    // PIN-FAIL-CLEAN: a size above 2^63 rounded up to a power of two wraps to
    // 0, and the size-class index it gives is out of range: an assertion aborts.
    bool abort_on_wrapped_size_class = false;
    // PIN-FAIL-CLEAN: an out-of-memory refusal returns with the pool's lock
    // still held once (a recursive lock: this thread goes on, others block).
    bool refusal_keeps_lock = false;
    // PIN-FAIL-CLEAN: an out-of-memory refusal stays pending and is reported
    // by the next allocation, on any thread, instead of its success.
    bool refusal_sticks = false;
};

inline Bugs &bugs() {
    static Bugs b;
    return b;
}

struct Config {
    Method method = Method::Mlock;
    bool pooled = true;
};
inline Config &config() {
    static Config c;
    return c;
}

// ---- the fake CUDA driver, for Method::CudaDriver ---------------------------

// The few entry points pinning needs, from the library the CUDA backend loads.
// Every registration holds a retain of device 0's primary context, so the
// context lives exactly as long as something is pinned.
struct Cu {
    int (*init)(unsigned) = nullptr;
    int (*device_get)(int *, int) = nullptr;
    int (*retain)(void **, int) = nullptr;
    int (*release)(int) = nullptr;
    int (*push)(void *) = nullptr;
    int (*pop)(void **) = nullptr;
    int (*host_register)(void *, size_t, unsigned) = nullptr;
    int (*host_unregister)(void *) = nullptr;
    std::string why;  // "" when usable

    static Cu &get() {
        static Cu c = [] {
            Cu d;
            const char *lib = std::getenv("XMC_CUDA_DRIVER");
            void *h = dlopen(lib && *lib ? lib : "libcuda.so.1", RTLD_NOW);
            if (!h) {
                d.why = "no CUDA driver";
                return d;
            }
            d.init = reinterpret_cast<int (*)(unsigned)>(dlsym(h, "cuInit"));
            d.device_get = reinterpret_cast<int (*)(int *, int)>(dlsym(h, "cuDeviceGet"));
            d.retain = reinterpret_cast<int (*)(void **, int)>(dlsym(h, "cuDevicePrimaryCtxRetain"));
            d.release = reinterpret_cast<int (*)(int)>(dlsym(h, "cuDevicePrimaryCtxRelease_v2"));
            d.push = reinterpret_cast<int (*)(void *)>(dlsym(h, "cuCtxPushCurrent_v2"));
            d.pop = reinterpret_cast<int (*)(void **)>(dlsym(h, "cuCtxPopCurrent_v2"));
            d.host_register = reinterpret_cast<int (*)(void *, size_t, unsigned)>(dlsym(h, "cuMemHostRegister_v2"));
            d.host_unregister = reinterpret_cast<int (*)(void *)>(dlsym(h, "cuMemHostUnregister"));
            if (!d.init || !d.device_get || !d.retain || !d.release || !d.push || !d.pop || !d.host_register ||
                !d.host_unregister)
                d.why = "the CUDA driver lacks an entry point the pool needs";
            else if (d.init(0) != 0)
                d.why = "cuInit failed";
            return d;
        }();
        return c;
    }
    // cuMemHostRegister of [p, p+n) in device 0's primary context; the CUresult.
    int pin(void *p, size_t n) {
        if (!why.empty()) return 100;  // CUDA_ERROR_NO_DEVICE
        int dev = 0;
        void *ctx = nullptr, *popped = nullptr;
        if (int r = device_get(&dev, 0); r != 0) return r;
        if (int r = retain(&ctx, dev); r != 0) return r;
        int r = push(ctx);
        if (r == 0) {
            r = host_register(p, n, 0);
            pop(&popped);
        }
        if (r != 0) release(dev);  // the retain goes with a refused registration
        return r;
    }
    int unpin(void *p) {
        int dev = 0;
        void *ctx = nullptr, *popped = nullptr;
        if (int r = device_get(&dev, 0); r != 0) return r;
        if (int r = retain(&ctx, dev); r != 0) return r;  // to make it current
        int r = push(ctx);
        if (r == 0) {
            r = host_unregister(p);
            pop(&popped);
        }
        release(dev);                // the one just taken
        if (r == 0) release(dev);    // and the registration's
        return r;
    }
};

// ---- the pool ---------------------------------------------------------------

struct Block {
    uintptr_t base = 0;
    size_t size = 0;      // whole pages
    uint32_t refs = 0;    // pin_ref's
    bool owner = true;    // the allocation's own reference
};

struct Pool {
    std::recursive_mutex mu;            // recursive: refusal_keeps_lock leaves a level held
    std::map<uintptr_t, Block> live;    // handed out, by base
    std::vector<Block> free_list;       // pooled, the newest last
    std::map<uintptr_t, size_t> pinned_table;  // query_trusts_stale_table: what was ever pinned
    uint64_t bytes_now = 0, bytes_peak = 0, pooled_bytes = 0;
    xmc_status pending = XMC_OK;        // refusal_sticks
    int64_t pending_native = 0;

    // The block whose [base, base+size) holds addr, or live.end().
    std::map<uintptr_t, Block>::iterator containing(uintptr_t addr) {
        auto it = live.upper_bound(addr);
        if (it == live.begin()) return live.end();
        --it;
        return addr - it->first < it->second.size ? it : live.end();
    }
};

inline Pool &pool() {
    static Pool p;
    return p;
}

inline size_t page() { return be::PinRegistry::page_size(); }

// Pins [p, p+n) by the configured method; on refusal the status and native
// code say why (the memlock status names RLIMIT_MEMLOCK, as the reference).
inline xmc_status pin_pages(xmc_instance *inst, void *p, size_t n) {
    if (config().method == Method::Mlock) {
        if (mlock(p, n) == 0) return XMC_OK;
        const int err = errno;
        if (err == ENOMEM || err == EPERM) {
            struct rlimit lim{};
            getrlimit(RLIMIT_MEMLOCK, &lim);
            return be::fail(inst, XMC_ERR_MEMLOCK, err, "pin_alloc",
                            "pin_alloc: mlock of %zu bytes refused (%s): RLIMIT_MEMLOCK is %llu bytes", n,
                            std::strerror(err), static_cast<unsigned long long>(lim.rlim_cur));
        }
        return be::fail(inst, XMC_ERR_DRIVER, err, "pin_alloc", "pin_alloc: mlock failed: %s", std::strerror(err));
    }
    const int r = Cu::get().pin(p, n);
    if (r == 0) return XMC_OK;
    return be::fail(inst, r == 2 ? XMC_ERR_OUT_OF_MEMORY : XMC_ERR_DRIVER, r, "pin_alloc",
                    "pin_alloc: cuMemHostRegister of %zu bytes failed with %d", n, r);
}

inline void unpin_pages(const Block &b, bool skip_driver) {
    void *p = reinterpret_cast<void *>(b.base);
    if (config().method == Method::Mlock) munlock(p, b.size);
    else if (!skip_driver) Cu::get().unpin(p);
}

// Gives a block's pages back (unpinned, freed). Caller holds mu.
inline void give_back(const Block &b, bool skip_driver = false) {
    unpin_pages(b, skip_driver);
    std::free(reinterpret_cast<void *>(b.base));
}

// The last reference went: to the free list, or (no pool) back. Caller holds mu.
inline void retire(Pool &pl, std::map<uintptr_t, Block>::iterator it) {
    Block b = it->second;
    pl.live.erase(it);
    pl.bytes_now -= b.size;
    if (!config().pooled) {
        give_back(b);
        return;
    }
    b.refs = 0;
    b.owner = true;
    pl.free_list.push_back(b);
    pl.pooled_bytes += b.size;
}

inline xmc_status pin_alloc(xmc_instance *inst, size_t bytes, size_t alignment, int32_t device, xmc_pin_result *out) {
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc", "pin_alloc: result pointer is NULL");
    if (device != XMC_NO_DEVICE)
        return be::fail(inst, XMC_ERR_UNSUPPORTED, 0, "pin_alloc",
                        "pin_alloc: the pool cannot register with device %d (capability pin_register not declared)",
                        device);
    if (bytes == 0) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc", "pin_alloc: size is 0");
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc", "pin_alloc: alignment %zu is not a power of two",
                        alignment);
    if (alignment > be::PinRegistry::kMaxAlignment)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc",
                        "pin_alloc: alignment %zu is above the largest this pool honours", alignment);
    if (bytes > SIZE_MAX - page())
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc",
                        "pin_alloc: size %zu overflows when rounded up to pages", bytes);
    if (bugs().abort_on_wrapped_size_class && bytes > (size_t{1} << 63)) {
        std::fprintf(stderr, "pool: size class index 64 out of range for %zu bytes\n", bytes);
        std::abort();
    }
    const size_t size = (bytes + page() - 1) / page() * page();
    const size_t align = alignment < page() ? page() : alignment;
    Pool &pl = pool();
    std::lock_guard<std::recursive_mutex> lock(pl.mu);
    auto hand_out = [&](const Block &b) -> xmc_status {
        if (pl.pending != XMC_OK) {  // refusal_sticks: the earlier refusal, reported now
            const xmc_status st = pl.pending;
            pl.pending = XMC_OK;
            Block back = b;
            if (config().pooled) {
                pl.free_list.push_back(back);
                pl.pooled_bytes += back.size;
            } else {
                give_back(back);
            }
            return be::fail(inst, st, pl.pending_native, "pin_alloc", "pin_alloc: out of memory");
        }
        pl.live[b.base] = b;
        pl.bytes_now += b.size;
        if (pl.bytes_now > pl.bytes_peak) pl.bytes_peak = pl.bytes_now;
        *out = xmc_pin_result{};
        out->base = reinterpret_cast<void *>(b.base);
        out->size = b.size;
        return XMC_OK;
    };
    // The free list first, newest first: a pooled block of the size, aligned as asked.
    for (size_t i = pl.free_list.size(); i-- > 0;) {
        const Block b = pl.free_list[i];
        if (b.size != size || b.base % align != 0) continue;
        if (!(bugs().large_handout_stays_listed && size >= (size_t{1} << 20))) {
            pl.free_list.erase(pl.free_list.begin() + static_cast<std::ptrdiff_t>(i));
            pl.pooled_bytes -= b.size;
        }
        return hand_out(Block{b.base, b.size, 0, true});
    }
    void *p = nullptr;
    if (int rc = posix_memalign(&p, align, size); rc != 0) {
        if (bugs().refusal_keeps_lock) pl.mu.lock();  // the error path's unlock is missing
        if (bugs().refusal_sticks) {
            pl.pending = XMC_ERR_OUT_OF_MEMORY;
            pl.pending_native = rc;
        }
        return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, rc, "pin_alloc", "pin_alloc: posix_memalign(%zu, %zu) failed: %s",
                        align, size, std::strerror(rc));
    }
    if (xmc_status st = pin_pages(inst, p, size); st != XMC_OK) {
        if (!bugs().leak_on_refused_pinning) std::free(p);
        return st;
    }
    if (bugs().query_trusts_stale_table) pl.pinned_table[reinterpret_cast<uintptr_t>(p)] = size;
    return hand_out(Block{reinterpret_cast<uintptr_t>(p), size, 0, true});
}

inline xmc_status pin_free(xmc_instance *inst, void *base) {
    Pool &pl = pool();
    std::lock_guard<std::recursive_mutex> lock(pl.mu);
    const auto a = reinterpret_cast<uintptr_t>(base);
    auto it = pl.containing(a);
    if (it == pl.live.end() || it->first != a || !it->second.owner) {
        const char *why = it == pl.live.end() ? "is not inside any pinned block"
                          : it->first != a    ? "is interior to a pinned block"
                                              : "was already freed (references still held)";
        return be::fail(inst, XMC_ERR_NOT_PINNED_BASE, 0, "pin_free", "pin_free: address %p %s", base, why);
    }
    if (it->second.refs > 0) {
        it->second.owner = false;
        return XMC_OK;
    }
    retire(pl, it);
    return XMC_OK;
}

inline xmc_status pin_query(xmc_instance *inst, const void *addr, size_t len, xmc_pin_info *out) {
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_query", "pin_query: result pointer is NULL");
    *out = xmc_pin_info{};
    const auto a = reinterpret_cast<uintptr_t>(addr);
    const size_t n = len == 0 ? 1 : len;
    if (a > UINTPTR_MAX - n) return XMC_OK;
    Pool &pl = pool();
    std::lock_guard<std::recursive_mutex> lock(pl.mu);
    auto it = pl.containing(a);
    if (it != pl.live.end() && a + n <= it->first + it->second.size) {
        *out = xmc_pin_info{1, reinterpret_cast<void *>(it->first), it->second.size};
        return XMC_OK;
    }
    if (bugs().query_trusts_stale_table) {  // no live block: what the driver once pinned
        auto t = pl.pinned_table.upper_bound(a);
        if (t != pl.pinned_table.begin() && (--t, a + n <= t->first + t->second))
            *out = xmc_pin_info{1, reinterpret_cast<void *>(t->first), t->second};
    }
    return XMC_OK;
}

// A statistics entry `call`: refuses a NULL result pointer, else fills *out with what `read`
// reads of the pool under its lock.
template <class Out, class Read> xmc_status read_stats(xmc_instance *inst, const char *call, Out *out, Read read) {
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: result pointer is NULL", call);
    Pool &pl = pool();
    std::lock_guard<std::recursive_mutex> lock(pl.mu);
    *out = read(pl);
    return XMC_OK;
}

inline xmc_status pin_stats(xmc_instance *inst, xmc_pin_stats *out) {
    return read_stats(inst, "pin_stats", out,
                      [](const Pool &pl) { return xmc_pin_stats{pl.bytes_now, pl.bytes_peak, pl.live.size()}; });
}

inline xmc_status pin_ref(xmc_instance *inst, const void *addr) {
    Pool &pl = pool();
    std::lock_guard<std::recursive_mutex> lock(pl.mu);
    auto it = pl.containing(reinterpret_cast<uintptr_t>(addr));
    if (it == pl.live.end())
        return be::fail(inst, XMC_ERR_NOT_PINNED_BASE, 0, "pin_ref", "pin_ref: %p is not inside any pinned block", addr);
    ++it->second.refs;
    return XMC_OK;
}

inline xmc_status pin_unref(xmc_instance *inst, const void *addr) {
    Pool &pl = pool();
    std::lock_guard<std::recursive_mutex> lock(pl.mu);
    auto it = pl.containing(reinterpret_cast<uintptr_t>(addr));
    if (it == pl.live.end())
        return be::fail(inst, XMC_ERR_NOT_PINNED_BASE, 0, "pin_unref", "pin_unref: %p is not inside any pinned block",
                        addr);
    if (it->second.refs == 0)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_unref",
                        "pin_unref: block %p holds no reference taken with pin_ref", reinterpret_cast<void *>(it->first));
    if (--it->second.refs == 0 && !it->second.owner) retire(pl, it);
    return XMC_OK;
}

// Empties the free list: every pooled block unpinned and freed. Caller holds
// mu. `asked`: pin_pool_release's walk, where the release bugs sit (the last
// close's walk is another, correct one).
inline void release_free_list(Pool &pl, bool asked) {
    std::vector<Block> blocks;
    blocks.swap(pl.free_list);
    pl.pooled_bytes = 0;
    for (size_t i = 0; i < blocks.size(); ++i) {
        if (asked && bugs().release_misses_newest && i + 1 == blocks.size()) break;  // one short
        give_back(blocks[i], asked && bugs().release_skips_unregister);
    }
}

inline xmc_status pin_pool_release(xmc_instance *) {
    Pool &pl = pool();
    std::lock_guard<std::recursive_mutex> lock(pl.mu);
    release_free_list(pl, true);
    return XMC_OK;
}

inline xmc_status pin_pool_stats(xmc_instance *inst, xmc_pin_pool_stats *out) {
    return read_stats(inst, "pin_pool_stats", out,
                      [](const Pool &pl) { return xmc_pin_pool_stats{pl.pooled_bytes, pl.free_list.size()}; });
}

inline size_t pin_min_alignment(xmc_instance *) { return page(); }

// The base backend's close_report, then (the last instance) every live block
// and the free list, counted as the reference counts them.
inline xmc_status (*&base_close_report())(xmc_instance *, xmc_close_report *) {
    static xmc_status (*f)(xmc_instance *, xmc_close_report *) = nullptr;
    return f;
}

inline xmc_status close_report(xmc_instance *inst, xmc_close_report *out) {
    xmc_close_report r{};
    if (xmc_status st = base_close_report()(inst, &r); st != XMC_OK) return st;
    if (r.last_instance) {
        Pool &pl = pool();
        std::lock_guard<std::recursive_mutex> lock(pl.mu);
        for (auto &[base, b] : pl.live) {
            ++r.pinned_blocks;
            r.pinned_bytes += b.size;
            give_back(b);
        }
        pl.live.clear();
        pl.bytes_now = 0;
        release_free_list(pl, false);
    }
    if (out) *out = r;
    return XMC_OK;
}

inline xmc_status close(xmc_instance *inst) { return close_report(inst, nullptr); }

// Replaces the pinning of table `t` (a host or CUDA reference table) by the
// pool: pin_cache when `pooled`, pin_driver with Method::CudaDriver, no
// pin_register (the pool registers with no device).
inline void use_pool(xmc_backend &t, Method method, bool pooled) {
    config().method = method;
    config().pooled = pooled;
    base_close_report() = t.close_report;
    t.capabilities &= ~XMC_CAP_PIN_REGISTER;
    if (pooled) t.capabilities |= XMC_CAP_PIN_CACHE;
    if (method == Method::CudaDriver) t.capabilities |= XMC_CAP_PIN_DRIVER;
    t.pin_alloc = pin_alloc;
    t.pin_free = pin_free;
    t.pin_query = pin_query;
    t.pin_stats = pin_stats;
    t.pin_ref = pin_ref;
    t.pin_unref = pin_unref;
    t.pin_min_alignment = pin_min_alignment;
    t.close_report = close_report;
    t.close = close;
    t.pin_pool_release = pooled ? pin_pool_release : nullptr;
    t.pin_pool_stats = pooled ? pin_pool_stats : nullptr;
}

// A bug file's whole plant(): the pool of `method`, with the one bug `bug` on.
inline void plant_bug(xmc_backend &t, Method method, bool Bugs::*bug, bool pooled = true) {
    use_pool(t, method, pooled);
    bugs().*bug = true;
}

} // namespace xmc::broken_pool
