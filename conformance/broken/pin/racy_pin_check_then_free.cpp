// xmc-selftest: fails PIN-THREADS
// xmc-selftest: filter PIN-THREADS
// xmc-selftest: sanitize thread
// xmc-selftest: timeout 30
// Bug (race): free checks under the lock that the address is a live base, then lets
// the lock go and takes the block out of the index and the count without it (check,
// then act). Two threads freeing one block both pass the check: both frees succeed
// (a double free reported as two successes), the count drops twice, and the erase
// races every other thread's use of the index.
#include "pin_index.hpp"

namespace xmc::broken {
static xmc_status pin_free(xmc_instance *inst, void *p) {
    PinIndex &x = PinIndex::get();
    size_t size = 0;
    {
        std::lock_guard<std::mutex> lock(x.mu);
        auto it = x.find(reinterpret_cast<uintptr_t>(p));
        if (it == x.blocks.end()) return refuse_free(inst, p);
        size = it->size;
    }
    std::this_thread::yield();  // the window between the check and the act
    if (auto it = x.find(reinterpret_cast<uintptr_t>(p)); it != x.blocks.end())
        x.blocks.erase(it);  // the bug: the act outside the lock that made the check
    x.bytes_now -= size;
    host()->pin_free(inst, p);  // the second of two frees is refused here, and ignored
    return XMC_OK;
}
void plant(xmc_backend &t) {
    use_pin_index(t);
    t.pin_free = pin_free;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_racy_pin_check_then_free")
