// xmc-selftest: fails PIN-THREADS
// xmc-selftest: filter PIN-THREADS
// xmc-selftest: sanitize thread
// xmc-selftest: timeout 30
// Bug (race): an allocation finds its block's place in the sorted index and inserts
// it there without the index's lock (the lock is taken for the count only, "the
// insert is the cheap part"). Another thread's insert or erase in between moves the
// place: the block lands out of order and binary searches miss it (a live block
// reported not pinned), or the vector is reallocated under the unlocked insert.
#include "pin_index.hpp"

namespace xmc::broken {
static xmc_status pin_alloc(xmc_instance *inst, size_t n, size_t a, int32_t dev, xmc_pin_result *out) {
    const xmc_status st = host()->pin_alloc(inst, n, a, dev, out);
    if (st != XMC_OK) return st;
    PinIndex &x = PinIndex::get();
    const auto base = reinterpret_cast<uintptr_t>(out->base);
    const size_t at = x.position(base);  // the bug: the place found and used outside x.mu
    std::this_thread::yield();
    x.insert(at, base, out->size);
    std::lock_guard<std::mutex> lock(x.mu);
    x.count(static_cast<int64_t>(out->size));
    return st;
}
void plant(xmc_backend &t) {
    use_pin_index(t);
    t.pin_alloc = pin_alloc;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_racy_pin_unlocked_insert")
