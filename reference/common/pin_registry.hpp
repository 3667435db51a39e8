// Process-wide registry of pinned blocks: posix_memalign + mlock, an ordered
// index from base address to block (a lookup is a logarithmic search, never a
// scan), byte accounting and references (PIN-*). One registry per backend
// library, shared by all its instances (PIN-SHARED).
#pragma once
#include "block_index.hpp"
#include "errors.hpp"

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace xmc::be {

struct PinBlock {
    uintptr_t base = 0;
    size_t size = 0;             // page-rounded; what query reports
    bool owner_alive = true;     // the allocation's own reference, dropped by free
    uint32_t extra_refs = 0;     // references taken with ref()
    // PIN-DEVICE: set only once the registration succeeded (set_device).
    int32_t device = XMC_NO_DEVICE;  // device it is registered with, if any
};

class PinRegistry {
public:
    // Called when a block's last reference goes, before its pages are
    // unlocked and freed: a GPU backend unregisters the block from its driver
    // here. A failure (status, with the native code in *native) keeps the
    // block live and unchanged, and the free reports it: success is never
    // reported while the device may still map the pages (seed 000's bug).
    using ReleaseHook = xmc_status (*)(const PinBlock &block, int64_t *native, char *why, size_t why_len);

    static PinRegistry &process();
    static size_t page_size();
    // PIN-KINDS: the alignment every block has (pin_min_alignment): a page.
    static size_t min_alignment() { return page_size(); }
    // PIN-KINDS: the largest alignment honoured. posix_memalign reserves the
    // size plus the alignment, so a larger one is refused as an invalid
    // argument, never weakened to a smaller one.
    static constexpr size_t kMaxAlignment = size_t{1} << 30;

    // Under the registry's lock: every instance's open sets it, and instances open on any thread at
    // once (ThreadSanitizer saw two opens race on it).
    void set_release_hook(ReleaseHook hook) {
        std::lock_guard<std::mutex> lock(mu_);
        release_hook_ = hook;
    }

    // PIN-THREADS: the registry's lock around each entry point `call` (pin_alloc, pin_free,
    // pin_query, ...). A racy broken backend of the self-test (conformance/broken/pin/) replaces
    // one to leave the lock out of one entry point; nothing else changes them.
    struct LockSteps {
        void (*lock)(std::mutex &mu, const char *call);
        void (*unlock)(std::mutex &mu, const char *call);
    };
    LockSteps lock_steps{[](std::mutex &mu, const char *) { mu.lock(); },
                         [](std::mutex &mu, const char *) { mu.unlock(); }};
    std::mutex &mutex() const { return mu_; }

    // Allocates and locks; on success the block is live and accounted.
    xmc_status alloc(xmc_instance *inst, size_t bytes, size_t alignment, PinBlock *out);
    // A platform's step that registers a fresh block with a device: the status, and the driver's
    // code in *native when a driver answered.
    using RegisterBlock = xmc_status (*)(xmc_instance *inst, uintptr_t base, size_t size, int32_t device,
                                         int64_t *native);
    // pin_alloc over a driver (PIN-ALLOC, PIN-DEVICE): a device index that cannot exist (negative,
    // or past `device_count` where the driver is `usable`) is bad input, refused before anything is
    // allocated; then the block is pinned and, for a device, registered by `register_block`. A
    // refused registration leaves the block lock-only, saying why with the driver's code: never a
    // silent degradation (a registration bug the suite was built from).
    xmc_status alloc_for_device(xmc_instance *inst, size_t bytes, size_t alignment, int32_t device, bool usable,
                                size_t device_count, RegisterBlock register_block, xmc_pin_result *out);
    // Records the device a live block was registered with.
    void set_device(uintptr_t base, int32_t device);
    xmc_status free(xmc_instance *inst, void *base);
    xmc_status query(xmc_instance *inst, const void *addr, size_t len, xmc_pin_info *out) const;
    xmc_status ref(xmc_instance *inst, const void *addr);
    xmc_status unref(xmc_instance *inst, const void *addr);
    xmc_status stats(xmc_instance *inst, xmc_pin_stats *out) const;
    // PIN-CLOSE: the last instance's close releases every live block, whatever
    // references it still holds, through the release hook (device
    // registrations first). Counts the blocks and bytes released; a hook
    // failure stops there and is reported, the blocks not yet released stay.
    xmc_status release_all(xmc_instance *inst, const char *call, uint64_t *blocks, uint64_t *bytes);

private:
    // Gives back the memory of a block with no reference left, or leaves it
    // untouched and returns the hook's failure. Caller holds mu_.
    xmc_status release(xmc_instance *inst, PinBlock *block, const char *call);

    struct Guard {  // lock_steps.lock .. unlock over one entry point
        const PinRegistry &r;
        const char *call;
        Guard(const PinRegistry &r, const char *call) : r(r), call(call) { r.lock_steps.lock(r.mu_, call); }
        ~Guard() { r.lock_steps.unlock(r.mu_, call); }
    };
    // PIN-THREADS: one lock over the index and the counts: no lost update.
    mutable std::mutex mu_;
    mutable BlockIndex<PinBlock> blocks_;
    uint64_t bytes_now_ = 0;
    uint64_t bytes_peak_ = 0;
    ReleaseHook release_hook_ = nullptr;
};

} // namespace xmc::be
