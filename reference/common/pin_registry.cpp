#include "pin_registry.hpp"

#include "memory_book.hpp"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace xmc::be {

PinRegistry &PinRegistry::process() {
    // PIN-SHARED: every instance of the library sees these blocks.
    static PinRegistry registry;  // one per backend library, whatever the instances
    return registry;
}

size_t PinRegistry::page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

static bool is_power_of_two(size_t v) { return v != 0 && (v & (v - 1)) == 0; }

xmc_status PinRegistry::alloc(xmc_instance *inst, size_t bytes, size_t alignment, PinBlock *out) {
    const size_t page = page_size();
    if (!out) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc", "pin_alloc: result pointer is NULL");
    // PIN-ALLOC: n = 0 and a non-power-of-two alignment are invalid.
    if (bytes == 0) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc", "pin_alloc: size is 0");
    if (!is_power_of_two(alignment))
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc",
                    "pin_alloc: alignment %zu is not a power of two", alignment);
    // PIN-KINDS: an alignment it cannot honour is refused, never weakened.
    if (alignment > kMaxAlignment)
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc",
                    "pin_alloc: alignment %zu is above the largest this backend honours (%zu)", alignment,
                    kMaxAlignment);
    if (bytes > SIZE_MAX - page)
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc",
                    "pin_alloc: size %zu overflows when rounded up to pages", bytes);
    // PIN-ALLOC: whole pages, page-aligned and at least as aligned as asked.
    // Whole pages, so that no two blocks share a page and munlock of one never
    // unlocks another.
    const size_t size = (bytes + page - 1) / page * page;
    const size_t align = alignment < page ? page : alignment;

    void *p = nullptr;
    int rc = posix_memalign(&p, align, size);
    if (rc != 0)
        return fail(inst, XMC_ERR_OUT_OF_MEMORY, rc, "pin_alloc",
                    "pin_alloc: posix_memalign(%zu, %zu) failed: %s", align, size, std::strerror(rc));
    // PIN-MEMLOCK: a refused mlock frees the block (no leak, nothing counted)
    // and reports the memlock status naming RLIMIT_MEMLOCK.
    if (mlock(p, size) != 0) {
        const int err = errno;
        std::free(p);  // nothing leaks and nothing was accounted
        if (err == ENOMEM || err == EPERM) {
            struct rlimit lim{};
            getrlimit(RLIMIT_MEMLOCK, &lim);
            return fail(inst, XMC_ERR_MEMLOCK, err, "pin_alloc",
                        "pin_alloc: mlock of %zu bytes refused (%s): RLIMIT_MEMLOCK is %llu bytes",
                        size, std::strerror(err), static_cast<unsigned long long>(lim.rlim_cur));
        }
        return fail(inst, XMC_ERR_DRIVER, err, "pin_alloc", "pin_alloc: mlock failed: %s",
                    std::strerror(err));
    }
    PinBlock block;
    block.base = reinterpret_cast<uintptr_t>(p);
    block.size = size;
    {
        Guard lock(*this, "pin_alloc");
        blocks_.insert(block);
        book_add(block.base, block.size, MemKind::Pinned);  // a new serial, also at a freed block's address
        // PIN-ACCOUNT: bytes_now sums the live blocks; peak is its high water.
        bytes_now_ += size;
        if (bytes_now_ > bytes_peak_) bytes_peak_ = bytes_now_;
    }
    *out = block;
    return ok();
}

xmc_status PinRegistry::alloc_for_device(xmc_instance *inst, size_t bytes, size_t alignment, int32_t device,
                                         bool usable, size_t device_count, RegisterBlock register_block,
                                         xmc_pin_result *out) {
    // Before anything is allocated: a block whose base cannot be returned would leak.
    if (!out) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc", "pin_alloc: result pointer is NULL");
    if (device != XMC_NO_DEVICE && (device < 0 || (usable && static_cast<size_t>(device) >= device_count)))
        return fail(inst, XMC_ERR_NO_DEVICE, 0, "pin_alloc", "pin_alloc: no device %d (the driver has %zu)", device,
                    device_count);
    PinBlock block;
    if (xmc_status st = alloc(inst, bytes, alignment, &block); st != XMC_OK) return st;
    *out = xmc_pin_result{};
    out->base = reinterpret_cast<void *>(block.base);
    out->size = block.size;
    if (device == XMC_NO_DEVICE) return ok();
    int64_t native = 0;
    if (const xmc_status reg = register_block(inst, block.base, block.size, device, &native); reg != XMC_OK) {
        out->reg_status = reg;  // lock-only, and it says so
        out->reg_native_code = native;
        return ok();
    }
    // After the platform's registration locks are released: the release hook takes them under
    // this registry's lock, so the two are never taken in the other order.
    set_device(block.base, device);
    out->registered = 1;
    return ok();
}

void PinRegistry::set_device(uintptr_t base, int32_t device) {
    Guard lock(*this, "pin_alloc");
    if (PinBlock *b = blocks_.find(base)) b->device = device;
}

xmc_status PinRegistry::release(xmc_instance *inst, PinBlock *b, const char *call) {
    const PinBlock block = *b;
    // REG-UNREG-FAIL (pinned blocks): the device registration goes first; if
    // the driver refuses, the block stays pinned and the call fails.
    if (release_hook_) {
        int64_t native = 0;
        char why[256] = "";
        xmc_status st = release_hook_(block, &native, why, sizeof why);
        if (st != XMC_OK)
            return fail(inst, st, native, call, "%s: block %p kept pinned: the driver did not release it: %s", call,
                        reinterpret_cast<void *>(block.base), why);
    }
    // PIN-AFTER-FREE: out of the index (nothing reports pinned), out of the
    // count, unlocked, freed.
    blocks_.erase(block.base);
    book_remove(block.base, MemKind::Pinned);
    bytes_now_ -= block.size;
    void *p = reinterpret_cast<void *>(block.base);
    munlock(p, block.size);
    std::free(p);
    return ok();
}

xmc_status PinRegistry::free(xmc_instance *inst, void *base) {
    Guard lock(*this, "pin_free");
    const auto addr = reinterpret_cast<uintptr_t>(base);
    PinBlock *b = blocks_.find_containing(addr);
    // PIN-FREE: each refusal has its own message and changes nothing.
    // Exactly a live base whose owner reference is still held: an interior or
    // unknown address, or a second free, is refused and changes nothing.
    if (!b || b->base != addr || !b->owner_alive) {
        const char *why = !b ? "is not inside any pinned block"
                          : b->base != addr ? "is interior to a pinned block"
                                            : "was already freed (references still held)";
        return fail(inst, XMC_ERR_NOT_PINNED_BASE, 0, "pin_free", "pin_free: address %p %s", base, why);
    }
    // PIN-REFS: references still held: free drops the owner's only.
    if (b->extra_refs > 0) {
        b->owner_alive = false;
        return ok();
    }
    return release(inst, b, "pin_free");  // on failure the owner reference stays
}

xmc_status PinRegistry::query(xmc_instance *inst, const void *addr, size_t len,
                              xmc_pin_info *out) const {
    if (!out) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_query", "pin_query: result pointer is NULL");
    *out = xmc_pin_info{};
    const auto a = reinterpret_cast<uintptr_t>(addr);
    const size_t n = len == 0 ? 1 : len;  // a length of 0 asks about the address alone
    if (a > UINTPTR_MAX - n) return ok(); // wraps: cannot lie in one block
    Guard lock(*this, "pin_query");
    const PinBlock *b = blocks_.find_containing(a);
    // PIN-QUERY: any address inside gives base and size; base+n does not.
    // Pinned only when the whole extent lies in one block, not just its start.
    if (b && a + n <= b->base + b->size) {
        out->pinned = 1;
        out->base = reinterpret_cast<void *>(b->base);
        out->size = b->size;
    }
    return ok();
}

xmc_status PinRegistry::ref(xmc_instance *inst, const void *addr) {
    Guard lock(*this, "pin_ref");
    PinBlock *b = blocks_.find_containing(reinterpret_cast<uintptr_t>(addr));
    if (!b)
        return fail(inst, XMC_ERR_NOT_PINNED_BASE, 0, "pin_ref", "pin_ref: %p is not inside any pinned block", addr);
    // PIN-REFS: a reference through any interior address counts.
    ++b->extra_refs;
    return ok();
}

xmc_status PinRegistry::unref(xmc_instance *inst, const void *addr) {
    Guard lock(*this, "pin_unref");
    PinBlock *b = blocks_.find_containing(reinterpret_cast<uintptr_t>(addr));
    if (!b)
        return fail(inst, XMC_ERR_NOT_PINNED_BASE, 0, "pin_unref", "pin_unref: %p is not inside any pinned block", addr);
    if (b->extra_refs == 0)
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_unref",
                    "pin_unref: block %p holds no reference taken with pin_ref", reinterpret_cast<void *>(b->base));
    // PIN-REFS: any address of the block releases, also the recorded base after
    // the caller's pointer moved.
    // Released only when the last reference goes, owner's included.
    if (b->extra_refs == 1 && !b->owner_alive) return release(inst, b, "pin_unref");  // failure keeps the ref
    --b->extra_refs;
    return ok();
}

xmc_status PinRegistry::release_all(xmc_instance *inst, const char *call, uint64_t *blocks, uint64_t *bytes) {
    Guard lock(*this, "close");
    // PIN-CLOSE: every live block, its references and owner notwithstanding:
    // no instance is left to drop them.
    for (const PinBlock &b : blocks_.all()) {
        PinBlock *live = blocks_.find(b.base);
        if (xmc_status st = release(inst, live, call); st != XMC_OK) return st;  // the rest stays
        ++*blocks;
        *bytes += b.size;
    }
    return ok();
}

xmc_status PinRegistry::stats(xmc_instance *inst, xmc_pin_stats *out) const {
    if (!out) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_stats", "pin_stats: result pointer is NULL");
    Guard lock(*this, "pin_stats");
    // PIN-ACCOUNT: now and peak, read under the lock.
    out->bytes_now = bytes_now_;
    out->bytes_peak = bytes_peak_;
    out->blocks_now = blocks_.size();
    return ok();
}

} // namespace xmc::be
