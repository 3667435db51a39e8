// xmc-selftest: fails PIN-THREADS
// xmc-selftest: filter PIN-THREADS
// xmc-selftest: sanitize thread
// xmc-selftest: timeout 30
// Bug (race): the index is changed under its lock, but the byte count is updated
// after the lock went (read, add, write back), so concurrent allocations and frees
// lose each other's updates: bytes_now leaves what must and may be live. Unlike
// racy_accounting (an atomic load and store, a lost update ThreadSanitizer does not
// report), the count here is a plain variable.
#include "pin_index.hpp"

namespace xmc::broken {
static void count_unlocked(int64_t d) {
    PinIndex &x = PinIndex::get();
    const uint64_t v = x.bytes_now;  // the bug: read, modify, write with no lock
    std::this_thread::yield();
    x.bytes_now = v + static_cast<uint64_t>(d);
}
static xmc_status pin_alloc(xmc_instance *inst, size_t n, size_t a, int32_t dev, xmc_pin_result *out) {
    const xmc_status st = host()->pin_alloc(inst, n, a, dev, out);
    if (st != XMC_OK) return st;
    PinIndex &x = PinIndex::get();
    {
        std::lock_guard<std::mutex> lock(x.mu);
        const auto base = reinterpret_cast<uintptr_t>(out->base);
        x.insert(x.position(base), base, out->size);
    }
    count_unlocked(static_cast<int64_t>(out->size));
    return st;
}
static xmc_status pin_free(xmc_instance *inst, void *p) {
    PinIndex &x = PinIndex::get();
    size_t size = 0;
    {
        std::lock_guard<std::mutex> lock(x.mu);
        auto it = x.find(reinterpret_cast<uintptr_t>(p));
        if (it == x.blocks.end()) return refuse_free(inst, p);
        size = it->size;
        x.blocks.erase(it);
    }
    count_unlocked(-static_cast<int64_t>(size));
    return host()->pin_free(inst, p);
}
void plant(xmc_backend &t) {
    use_pin_index(t);
    t.pin_alloc = pin_alloc;
    t.pin_free = pin_free;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_racy_pin_unlocked_count")
