// The pinned-block index of the racy self-test backends (racy_pin_*.cpp): the host
// backend pins (its registry is correct), and query and stats answer from this index
// and its byte count, kept beside it the plain way: every change and every read under
// one lock. Each racy_pin_*.cpp puts back one entry of its own that drops the lock
// where it must not: a race that PIN-THREADS must catch without ThreadSanitizer (in
// at least 19 of 20 runs) and with it (every run; the index's fields are plain, so
// an unlocked access is a data race TSan reports). PIN-REFS is not declared: the
// index keeps no references.
#pragma once
#include "broken.hpp"

#include <algorithm>
#include <mutex>
#include <thread>
#include <vector>

namespace xmc::broken {

struct PinBlock {
    uintptr_t base;
    size_t size;
};

// A flat index: blocks sorted by base, found by binary search.
struct PinIndex {
    std::mutex mu;
    std::vector<PinBlock> blocks;
    uint64_t bytes_now = 0;
    uint64_t bytes_peak = 0;

    static PinIndex &get() {
        static PinIndex index;  // one per library, as the host's registry (PIN-SHARED)
        return index;
    }
    // Where a block at base a goes (the first block not below it). Caller holds mu.
    size_t position(uintptr_t a) const {
        return static_cast<size_t>(std::lower_bound(blocks.begin(), blocks.end(), a,
                                                    [](const PinBlock &b, uintptr_t v) { return b.base < v; }) -
                                   blocks.begin());
    }
    void insert(size_t at, uintptr_t a, size_t n) {  // caller holds mu
        blocks.insert(blocks.begin() + static_cast<long>(std::min(at, blocks.size())), PinBlock{a, n});
    }
    // The block whose base is a, or blocks.end(). Caller holds mu.
    std::vector<PinBlock>::iterator find(uintptr_t a) {
        const size_t i = position(a);
        return i < blocks.size() && blocks[i].base == a ? blocks.begin() + static_cast<long>(i) : blocks.end();
    }
    // The block holding [a, a+n), or blocks.end(). Caller holds mu.
    std::vector<PinBlock>::iterator holding(uintptr_t a, size_t n) {
        size_t i = position(a);
        if (i < blocks.size() && blocks[i].base == a) return blocks.begin() + static_cast<long>(i);
        if (i == 0) return blocks.end();
        const PinBlock &b = blocks[--i];
        return a - b.base < b.size && n <= b.size - (a - b.base) ? blocks.begin() + static_cast<long>(i) : blocks.end();
    }
    void count(int64_t d) {  // caller holds mu
        bytes_now += static_cast<uint64_t>(d);
        if (bytes_now > bytes_peak) bytes_peak = bytes_now;
    }
};

inline xmc_status index_alloc(xmc_instance *inst, size_t n, size_t a, int32_t dev, xmc_pin_result *out) {
    const xmc_status st = host()->pin_alloc(inst, n, a, dev, out);
    if (st != XMC_OK) return st;
    PinIndex &x = PinIndex::get();
    std::lock_guard<std::mutex> lock(x.mu);
    const auto base = reinterpret_cast<uintptr_t>(out->base);
    x.insert(x.position(base), base, out->size);
    x.count(static_cast<int64_t>(out->size));
    return st;
}

inline xmc_status refuse_free(xmc_instance *inst, void *p) {
    return be::fail(inst, XMC_ERR_NOT_PINNED_BASE, 0, "pin_free", "pin_free: %p is not the base of a live block", p);
}

inline xmc_status index_free(xmc_instance *inst, void *p) {
    PinIndex &x = PinIndex::get();
    {
        std::lock_guard<std::mutex> lock(x.mu);
        auto it = x.find(reinterpret_cast<uintptr_t>(p));
        if (it == x.blocks.end()) return refuse_free(inst, p);
        x.count(-static_cast<int64_t>(it->size));
        x.blocks.erase(it);
    }
    return host()->pin_free(inst, p);  // out of the index first: its address may be handed out again
}

inline xmc_status index_query(xmc_instance *inst, const void *p, size_t len, xmc_pin_info *out) {
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_query", "pin_query: result pointer is NULL");
    *out = xmc_pin_info{};
    const auto a = reinterpret_cast<uintptr_t>(p);
    const size_t n = len == 0 ? 1 : len;
    if (a > UINTPTR_MAX - n) return XMC_OK;
    PinIndex &x = PinIndex::get();
    std::lock_guard<std::mutex> lock(x.mu);
    if (auto it = x.holding(a, n); it != x.blocks.end()) {
        out->pinned = 1;
        out->base = reinterpret_cast<void *>(it->base);
        out->size = it->size;
    }
    return XMC_OK;
}

inline xmc_status index_stats(xmc_instance *inst, xmc_pin_stats *out) {
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_stats", "pin_stats: result pointer is NULL");
    PinIndex &x = PinIndex::get();
    std::lock_guard<std::mutex> lock(x.mu);
    out->bytes_now = x.bytes_now;
    out->bytes_peak = x.bytes_peak;
    out->blocks_now = x.blocks.size();
    return XMC_OK;
}

// The table with the index's pinning; the racy file then replaces one entry.
inline void use_pin_index(xmc_backend &t) {
    t.capabilities &= ~static_cast<xmc_caps>(XMC_CAP_PIN_REFS);
    t.pin_ref = nullptr;
    t.pin_unref = nullptr;
    t.pin_alloc = index_alloc;
    t.pin_free = index_free;
    t.pin_query = index_query;
    t.pin_stats = index_stats;
}

} // namespace xmc::broken
