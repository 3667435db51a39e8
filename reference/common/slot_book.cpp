// The slots' shared bookkeeping (slot_book.hpp): handles, option values and the submit checks
// that need no lock.
#include "slot_book.hpp"

#include "pin_registry.hpp"

#include <atomic>
#include <cerrno>
#include <cstdlib>

namespace xmc::be {

uintptr_t next_handle() {
    static std::atomic<uintptr_t> next{1};
    return next.fetch_add(1);
}

xmc_status bad_request(xmc_instance *inst, const char *call, xmc_request *h) {
    return fail(inst, XMC_ERR_INVALID_HANDLE, 0, call, "%s: %p is not a live request of this instance", call,
                static_cast<void *>(h));
}

bool option_number(const std::string &value, uint64_t *out) {
    char *end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
    if (value.empty() || value[0] < '0' || value[0] > '9' || *end != 0 || errno != 0) return false;
    *out = v;
    return true;
}

bool workers_option(const std::string &key, const std::string &value, unsigned *workers, xmc_status *st) {
    if (key != "vmm_workers") return false;
    uint64_t v = 0;
    const bool ok = option_number(value, &v) && v >= 1 && v <= 64;
    *st = ok ? XMC_OK : XMC_ERR_INVALID_ARGUMENT;
    if (ok) *workers = static_cast<unsigned>(v);
    return true;
}

xmc_status check_batch(xmc_instance *inst, const Batch &b) {
    // VMM-BATCH: an empty batch is refused like a NULL argument.
    if (!b.out || !b.handles || b.n == 0 || (b.remap && (!b.srcs || !b.src_bytes)))
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, b.call, "%s: NULL argument or empty batch", b.call);
    if (b.flags & ~XMC_REMAP_DEFER_COPY)
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, b.call, "%s: unknown flags %#x", b.call, b.flags);
    return XMC_OK;
}

xmc_status check_source(xmc_instance *inst, const char *call, size_t i, const void *src, size_t bytes,
                        size_t slot_size) {
    if (!src) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: source %zu is NULL", call, i);
    if (bytes < slot_size)
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: source %zu has %zu bytes, fewer than the slot's %zu",
                    call, i, bytes, slot_size);
    xmc_pin_info q{};
    PinRegistry::process().query(inst, src, bytes, &q);
    // VMM-REMAP-COPY: only the base of a pinned block holding all the bytes.
    if (!q.pinned || q.base != src)
        return fail(inst, XMC_ERR_NOT_PINNED_BASE, 0, call,
                    "%s: source %zu (%p, %zu bytes) is not the base of a pinned block holding it", call, i, src, bytes);
    return XMC_OK;
}

} // namespace xmc::be
