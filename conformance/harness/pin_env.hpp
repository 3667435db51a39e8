// The harness of the PIN-* tests (conformance/tests/test_pin.cpp,
// test_pin_methods.cpp): the
// fixture, PIN-KINDS's rules (the declared minimum alignment, and the lock
// state as the declared pinning method shows it), a child process that cannot
// exceed RLIMIT_MEMLOCK, and PIN-FAIL-CLEAN's "the next allocation succeeds,
// on this thread and on another".
#pragma once
#include "fixture.hpp"
#include "os_facts.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <sys/capability.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

namespace xmc::conformance {

// ---- PIN-KINDS: the lock state by the declared pinning method ---------------

// pin_driver: "locked" is the driver's word, asked by the suite itself, never
// through the backend. CUDA: cuMemHostGetFlags succeeds on an address inside
// memory the driver holds page-locked (cuMemHostAlloc'ed or registered; on
// the H200 with driver 580 it answers CUDA_ERROR_INVALID_VALUE elsewhere:
// hardware/probe/cuda_driver_580_h200.tsv, reg_get_flags_*). The driver is the
// library the backend loaded, named as the CUDA backend names it
// (XMC_CUDA_DRIVER, default libcuda.so.1), asked with device 0's primary
// context current, retained for the one question and released again.
class DriverLocks {
public:
    static DriverLocks &get() {
        static DriverLocks d;
        return d;
    }
    // Why the driver cannot be asked, or "" when it can.
    const std::string &why() const { return why_; }
    // Every page of [p, p+n) (at most 256 of them, spread evenly, and the
    // last byte) asked; all_locked when the driver holds each one.
    LockState state(const void *p, size_t n) const {
        LockState s;
        if (!why_.empty() || !p) return s;
        int ctx_dev = 0;
        void *ctx = nullptr;
        if (get_(&ctx_dev, 0) != 0 || retain_(&ctx, ctx_dev) != 0) return s;
        if (push_(ctx) == 0) {
            const size_t len = n == 0 ? 1 : n;
            const size_t pages = (len + page_size() - 1) / page_size();
            const size_t step = pages > 256 ? pages / 256 : 1;
            s.all_locked = true;
            auto ask = [&](const char *a) {
                unsigned flags = 0;
                const bool held = flags_(&flags, const_cast<char *>(a)) == 0;
                s.any_mapped = true;
                s.all_locked = s.all_locked && held;
                s.any_locked = s.any_locked || held;
            };
            const char *b = static_cast<const char *>(p);
            for (size_t i = 0; i < pages; i += step) ask(b + i * page_size());
            ask(b + len - 1);
            void *popped = nullptr;
            pop_(&popped);
        }
        release_(ctx_dev);
        return s;
    }

private:
    DriverLocks() {
        const char *env = std::getenv("XMC_CUDA_DRIVER");
        const std::string lib = env && *env ? env : "libcuda.so.1";
        void *h = dlopen(lib.c_str(), RTLD_NOW | RTLD_NOLOAD);  // the one the backend loaded
        if (!h) h = dlopen(lib.c_str(), RTLD_NOW);
        if (!h) {
            why_ = "pin_driver: the lock state is the CUDA driver's report, and '" + lib + "' cannot be loaded";
            return;
        }
        auto find = [&](const char *a, const char *b) { void *f = dlsym(h, a); return f ? f : dlsym(h, b); };
        using Init = int (*)(unsigned);
        auto init = reinterpret_cast<Init>(find("cuInit", "cuInit"));
        get_ = reinterpret_cast<int (*)(int *, int)>(find("cuDeviceGet", "cuDeviceGet"));
        retain_ = reinterpret_cast<int (*)(void **, int)>(find("cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain"));
        release_ = reinterpret_cast<int (*)(int)>(find("cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"));
        push_ = reinterpret_cast<int (*)(void *)>(find("cuCtxPushCurrent_v2", "cuCtxPushCurrent"));
        pop_ = reinterpret_cast<int (*)(void **)>(find("cuCtxPopCurrent_v2", "cuCtxPopCurrent"));
        flags_ = reinterpret_cast<int (*)(unsigned *, void *)>(find("cuMemHostGetFlags", "cuMemHostGetFlags"));
        if (!init || !get_ || !retain_ || !release_ || !push_ || !pop_ || !flags_) {
            why_ = "pin_driver: '" + lib + "' lacks an entry point the suite asks the lock state with";
            return;
        }
        if (const int r = init(0); r != 0) why_ = "pin_driver: cuInit of '" + lib + "' failed with " + std::to_string(r);
    }
    std::string why_;
    int (*get_)(int *, int) = nullptr;
    int (*retain_)(void **, int) = nullptr;
    int (*release_)(int) = nullptr;
    int (*push_)(void *) = nullptr;
    int (*pop_)(void **) = nullptr;
    int (*flags_)(unsigned *, void *) = nullptr;
};

// PIN-KINDS: why the declared method's lock state cannot be seen in this run,
// or nullptr: mlock pinning under a sanitizer (mlock is a no-op there), driver
// pinning with no driver to ask.
inline const char *lock_unobservable_reason(const xmc_backend *api) {
    if (api->capabilities & XMC_CAP_PIN_DRIVER) {
        const std::string &why = DriverLocks::get().why();
        return why.empty() ? nullptr : why.c_str();
    }
    return mlock_ignored_reason();
}

// PIN-KINDS: the lock state of [p, p+n) as the backend's pinning method shows
// it: `Locked:` (VmFlags lo) in smaps for mlock pinning, the driver's report
// with pin_driver.
inline LockState pinned_state(const xmc_backend *api, const void *p, size_t n) {
    if (api->capabilities & XMC_CAP_PIN_DRIVER) return DriverLocks::get().state(p, n);
    return lock_state(p, n);
}

// PIN-KINDS: the alignment every block of the backend has: what it declares,
// a page for a table that ends before pin_min_alignment.
inline size_t declared_min_alignment(const xmc_backend *api, xmc_instance *inst) {
    return api->pin_min_alignment ? api->pin_min_alignment(inst) : page_size();
}

} // namespace xmc::conformance

// In a test body: a declared skip where the method's lock state is unobservable.
#define XMC_SKIP_IF_LOCKS_UNOBSERVABLE()                                                   \
    do {                                                                                   \
        if (const char *xmc_why_ = ::xmc::conformance::lock_unobservable_reason(this->api)) \
            XMC_SKIP(::xmc::conformance::SkipKind::Unsupported, xmc_why_);                  \
    } while (0)

namespace xmc::conformance {

// The pin_stats at SetUp are the baseline a test's accounting is checked against.
class PinTest : public BackendTest {
protected:
    void SetUp() override {
        BackendTest::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        ASSERT_EQ(api->pin_stats(inst, &baseline_), XMC_OK);
        min_align_ = declared_min_alignment(api, inst);
    }
    xmc_pin_result alloc(size_t n, size_t align = 1) {
        xmc_pin_result r{};
        EXPECT_TRUE(status_is(XMC_OK, api->pin_alloc(inst, n, align, XMC_NO_DEVICE, &r)));
        return r;
    }
    xmc_pin_info query(const void *p, size_t len = 0) {
        xmc_pin_info q{};
        EXPECT_EQ(api->pin_query(inst, p, len, &q), XMC_OK);
        return q;
    }
    xmc_pin_stats stats() {
        xmc_pin_stats s{};
        EXPECT_EQ(api->pin_stats(inst, &s), XMC_OK);
        return s;
    }
    // PIN-POOL: the pool's figures (all zero without pin_cache).
    xmc_pin_pool_stats pool() {
        xmc_pin_pool_stats s{};
        if (has(XMC_CAP_PIN_CACHE)) {
            EXPECT_TRUE(status_is(XMC_OK, api->pin_pool_stats(inst, &s)));
        }
        return s;
    }
    // PIN-POOL: after a free, PIN-AFTER-FREE's lock rule holds once the pool is
    // released (a no-op without pin_cache).
    void release_pool() {
        if (has(XMC_CAP_PIN_CACHE)) {
            EXPECT_TRUE(status_is(XMC_OK, api->pin_pool_release(inst)));
        }
    }
    // PIN-KINDS: locked by the backend's method.
    bool locked(const void *p, size_t n) { return pinned_state(api, p, n).all_locked; }
    // Whether a page wholly inside [p, p+n) is locked. Locks are by page: a
    // page a block shares with a neighbour (a backend whose minimum alignment
    // is below a page) may be locked for the neighbour. A page-aligned block
    // of whole pages (the in-tree backends') is checked whole.
    bool any_locked(const void *p, size_t n) {
        const uintptr_t pg = page_size(), a = reinterpret_cast<uintptr_t>(p);
        const uintptr_t first = (a + pg - 1) / pg * pg, end = (a + n) / pg * pg;
        if (end <= first) return false;
        return pinned_state(api, reinterpret_cast<const void *>(first), end - first).any_locked;
    }

    xmc_pin_stats baseline_{};
    size_t min_align_ = 0;  // PIN-KINDS: the declared minimum alignment
};

// Runs `body` in a child that cannot exceed RLIMIT_MEMLOCK: it drops
// CAP_IPC_LOCK (root ignores the limit while holding it) and lowers the limit.
// The child reports through its exit status and a pipe; one that has not
// finished within `limit` (a lock the parent held when it forked is held in
// the child for good) is killed, and its message says so.
struct ChildResult {
    int status = 0;
    std::string message;
};

inline ChildResult run_limited_child(size_t limit, const std::function<std::string()> &body,
                                     std::chrono::seconds time_limit = std::chrono::seconds(15)) {
    int fds[2];
    if (pipe(fds) != 0) return {-1, "pipe failed"};
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        std::string msg;
        cap_t caps = cap_get_proc();
        cap_value_t lock = CAP_IPC_LOCK;
        if (!caps || cap_set_flag(caps, CAP_EFFECTIVE, 1, &lock, CAP_CLEAR) != 0 ||
            cap_set_flag(caps, CAP_PERMITTED, 1, &lock, CAP_CLEAR) != 0 || cap_set_proc(caps) != 0)
            msg = "cannot drop CAP_IPC_LOCK";
        if (caps) cap_free(caps);
        struct rlimit rl{limit, limit};
        if (msg.empty() && setrlimit(RLIMIT_MEMLOCK, &rl) != 0) msg = "cannot lower RLIMIT_MEMLOCK";
        if (msg.empty()) msg = body();
        ssize_t w = write(fds[1], msg.data(), msg.size());
        (void)w;
        _exit(msg.empty() ? 0 : 1);
    }
    close(fds[1]);
    ChildResult res;
    const auto deadline = std::chrono::steady_clock::now() + time_limit;
    while (waitpid(pid, &res.status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &res.status, 0);
            close(fds[0]);
            res.status = 1 << 8;  // exited 1: a failure with a message, not a crash
            res.message = "the child did not finish within " + std::to_string(time_limit.count()) +
                          " s: a lock held when it was forked (a refusal that left a lock held) blocks it";
            return res;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    char buf[512];
    for (ssize_t k; (k = read(fds[0], buf, sizeof buf)) > 0;) res.message.append(buf, k);
    close(fds[0]);
    return res;
}

// ---- PIN-FAIL-CLEAN: nothing left behind ----------------------------------

// One valid allocation of a page (for `device`, or none) and its free, on
// this thread, then on a fresh thread within `limit`: "" when both succeed
// (and, when `want_registered`, are registered with the device), else what
// went wrong. A refusal that left a lock held or an error pending shows here.
// A thread that does not come back is left behind, detached, holding only
// its own copies.
inline std::string next_allocation_succeeds(const xmc_backend *api, xmc_instance *inst, int32_t device,
                                            bool want_registered,
                                            std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    struct Outcome {
        xmc_status alloc = XMC_OK, free = XMC_OK;
        int32_t registered = 0;
        xmc_error_info error{};
    };
    auto once = [api, inst, device]() {
        Outcome o;
        xmc_pin_result r{};
        o.alloc = api->pin_alloc(inst, page_size(), 1, device, &r);
        if (o.alloc != XMC_OK) {
            api->last_error(inst, &o.error);
            return o;
        }
        o.registered = r.registered;
        o.free = api->pin_free(inst, r.base);
        if (o.free != XMC_OK) api->last_error(inst, &o.error);
        return o;
    };
    auto judge = [&](const Outcome &o, const char *where) -> std::string {
        const std::string on = std::string(" on ") + where + (device == XMC_NO_DEVICE ? "" : " for device " + std::to_string(device));
        if (o.alloc != XMC_OK)
            return std::string("the next valid pin_alloc") + on + " failed with " + xmc_status_string(o.alloc) +
                   " (native " + std::to_string(o.error.native_code) + ", " + o.error.message +
                   "): the refusal left something behind";
        if (o.free != XMC_OK)
            return std::string("pin_free of the next valid block") + on + " failed with " + xmc_status_string(o.free);
        if (want_registered && !o.registered)
            return std::string("the next valid pin_alloc") + on + " came back lock-only: the refusal poisoned the driver path";
        return "";
    };
    if (std::string e = judge(once(), "the same thread"); !e.empty()) return e;
    auto done = std::make_shared<std::promise<Outcome>>();
    std::future<Outcome> got = done->get_future();
    std::thread([once, done] { done->set_value(once()); }).detach();
    if (got.wait_for(limit) != std::future_status::ready)
        return "the next valid pin_alloc on another thread did not return within " +
               std::to_string(limit.count()) + " ms: the refusal left a lock held";
    return judge(got.get(), "another thread");
}

} // namespace xmc::conformance
