// xmc-selftest: fails PIN-THREADS
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 5
// Bug: the pinned-bytes counter is updated with a read-modify-write that is
// not atomic, so concurrent allocations and frees lose updates.
#include "broken.hpp"

#include <atomic>
#include <thread>

namespace xmc::broken {
static std::atomic<int64_t> counted{0};
static void add(int64_t d) {
    int64_t v = counted.load();
    std::this_thread::yield();  // the window in which another thread's update is lost
    counted.store(v + d);
}
static xmc_status pin_alloc(xmc_instance *inst, size_t n, size_t a, int32_t dev, xmc_pin_result *out) {
    xmc_status st = host()->pin_alloc(inst, n, a, dev, out);
    if (st == XMC_OK) add(static_cast<int64_t>(out->size));
    return st;
}
static xmc_status pin_free(xmc_instance *inst, void *p) {
    xmc_pin_info q{};
    host()->pin_query(inst, p, 1, &q);
    xmc_status st = host()->pin_free(inst, p);
    xmc_pin_info after{};
    host()->pin_query(inst, q.base, 1, &after);
    if (st == XMC_OK && !after.pinned) add(-static_cast<int64_t>(q.size));  // released, not just unowned
    return st;
}
static xmc_status pin_unref(xmc_instance *inst, const void *p) {
    xmc_pin_info q{};
    host()->pin_query(inst, p, 1, &q);
    xmc_status st = host()->pin_unref(inst, p);
    xmc_pin_info after{};
    host()->pin_query(inst, q.base, 1, &after);
    if (st == XMC_OK && q.pinned && !after.pinned) add(-static_cast<int64_t>(q.size));
    return st;
}
static xmc_status pin_stats(xmc_instance *inst, xmc_pin_stats *out) {
    xmc_status st = host()->pin_stats(inst, out);
    // The result is read only once the host filled it: a refusal (a NULL
    // result) is the host's, unchanged. The bug is the race, not a crash.
    if (st != XMC_OK) return st;
    // Reports its own counter, offset so that it agrees while nothing races.
    static const uint64_t base = out->bytes_now - static_cast<uint64_t>(counted.load());
    out->bytes_now = base + static_cast<uint64_t>(counted.load());
    return st;
}
void plant(xmc_backend &t) { t.pin_alloc = pin_alloc; t.pin_free = pin_free; t.pin_stats = pin_stats; t.pin_unref = pin_unref; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_racy_accounting")
