// The smallest useful xmc backend: pinning only (capability `pin`), written
// the way a vendor would, against the installed headers alone. It passes
// PIN-ALLOC .. PIN-THREADS, PIN-KINDS, PIN-FAIL-CLEAN and PIN-CLOSE; every
// other requirement reports unsupported.
#include <xmc/backend.h>

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

struct xmc_instance {};

namespace {

// One registry per process (PIN-SHARED): base -> size.
std::mutex mu;
std::map<uintptr_t, size_t> blocks;
uint64_t bytes_now = 0, bytes_peak = 0;
int open_instances = 0;  // PIN-CLOSE: the last close releases every block
thread_local xmc_error_info last{};

xmc_status fail(xmc_status st, int native, const char *call, const char *msg) {
    last = xmc_error_info{};
    last.status = st;
    last.native_code = native;
    std::snprintf(last.call, sizeof last.call, "%s", call);
    std::snprintf(last.message, sizeof last.message, "%s: %s", call, msg);
    return st;
}

// The block holding [a, a+n), or blocks.end().
std::map<uintptr_t, size_t>::iterator holding(uintptr_t a, size_t n) {
    auto it = blocks.upper_bound(a);
    if (it == blocks.begin()) return blocks.end();
    --it;
    return a >= it->first && n <= it->second && a - it->first <= it->second - n ? it : blocks.end();
}

// CORE-INSTANCE: a NULL result, a structure older than ABI version 1's, and
// any option (this backend has none) are refused; NULL params are the defaults.
xmc_status open(const xmc_open_params *params, xmc_instance **out) {
    if (!out) return XMC_ERR_INVALID_ARGUMENT;
    if (params && params->struct_size < offsetof(xmc_open_params, options) + sizeof params->options)
        return XMC_ERR_INVALID_ARGUMENT;
    if (params && params->options && params->options[0]) return XMC_ERR_INVALID_ARGUMENT;
    *out = new xmc_instance;
    std::lock_guard<std::mutex> l(mu);
    ++open_instances;
    return XMC_OK;
}
// PIN-CLOSE: the registry is the process's, so only the last close empties
// it: every block still allocated is unlocked and freed, and counted.
xmc_status close_report(xmc_instance *i, xmc_close_report *out) {
    if (!i) return XMC_ERR_INVALID_HANDLE;
    delete i;
    std::lock_guard<std::mutex> l(mu);
    xmc_close_report r{};
    if (--open_instances == 0) {
        r.last_instance = 1;
        for (auto &[base, size] : blocks) {
            munlock(reinterpret_cast<void *>(base), size);
            std::free(reinterpret_cast<void *>(base));
            ++r.pinned_blocks;
            r.pinned_bytes += size;
        }
        blocks.clear();
        bytes_now = 0;
    }
    if (out) *out = r;
    return XMC_OK;
}
xmc_status close(xmc_instance *i) { return close_report(i, nullptr); }
// PIN-KINDS: whole pages from posix_memalign.
size_t pin_min_alignment(xmc_instance *) { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
xmc_status device_count(xmc_instance *, int32_t *n) {
    if (!n) return fail(XMC_ERR_INVALID_ARGUMENT, 0, "device_count", "NULL result");
    *n = 0;
    return XMC_OK;
}
xmc_status device_info(xmc_instance *, int32_t, xmc_device_info *) {
    return fail(XMC_ERR_NO_DEVICE, 0, "device_info", "this backend has no device");
}
void last_error(xmc_instance *, xmc_error_info *out) { *out = last; }
const char *status_name(xmc_status s) { return xmc_status_string(s); }

xmc_status pin_alloc(xmc_instance *, size_t n, size_t align, int32_t dev, xmc_pin_result *out) {
    if (!out) return fail(XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc", "NULL result");  // before allocating
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    if (n == 0 || align == 0 || (align & (align - 1)) || n > SIZE_MAX - page)
        return fail(XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc", "size 0, or alignment not a power of two");
    // PIN-KINDS: an alignment it cannot honour is refused, never weakened.
    if (align > (size_t{1} << 30))
        return fail(XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc", "alignment above 1 GiB");
    if (dev != XMC_NO_DEVICE) return fail(XMC_ERR_UNSUPPORTED, 0, "pin_alloc", "no device to register with");
    const size_t size = (n + page - 1) / page * page;
    void *p = nullptr;
    if (int rc = posix_memalign(&p, align < page ? page : align, size))
        return fail(XMC_ERR_OUT_OF_MEMORY, rc, "pin_alloc", "posix_memalign failed");
    if (mlock(p, size) != 0) {
        int err = errno;
        std::free(p);
        return fail(XMC_ERR_MEMLOCK, err, "pin_alloc", "mlock refused: RLIMIT_MEMLOCK reached");
    }
    std::lock_guard<std::mutex> l(mu);
    blocks[reinterpret_cast<uintptr_t>(p)] = size;
    bytes_now += size;
    if (bytes_now > bytes_peak) bytes_peak = bytes_now;
    *out = xmc_pin_result{p, size, 0, XMC_OK, 0};
    return XMC_OK;
}

xmc_status pin_free(xmc_instance *, void *base) {
    std::lock_guard<std::mutex> l(mu);
    auto it = blocks.find(reinterpret_cast<uintptr_t>(base));
    if (it == blocks.end()) return fail(XMC_ERR_NOT_PINNED_BASE, 0, "pin_free", "not the base of a pinned block");
    munlock(base, it->second);
    bytes_now -= it->second;
    blocks.erase(it);
    std::free(base);
    return XMC_OK;
}

xmc_status pin_query(xmc_instance *, const void *addr, size_t len, xmc_pin_info *out) {
    if (!out) return fail(XMC_ERR_INVALID_ARGUMENT, 0, "pin_query", "NULL result");
    std::lock_guard<std::mutex> l(mu);
    auto it = holding(reinterpret_cast<uintptr_t>(addr), len ? len : 1);
    *out = it == blocks.end() ? xmc_pin_info{} : xmc_pin_info{1, reinterpret_cast<void *>(it->first), it->second};
    return XMC_OK;
}

xmc_status pin_stats(xmc_instance *, xmc_pin_stats *out) {
    if (!out) return fail(XMC_ERR_INVALID_ARGUMENT, 0, "pin_stats", "NULL result");
    std::lock_guard<std::mutex> l(mu);
    *out = xmc_pin_stats{bytes_now, bytes_peak, blocks.size()};
    return XMC_OK;
}

} // namespace

// Transfers: this backend declares neither `transfer` nor (0.3) `transfer_prepared`, so their
// entries stay NULL and AFF-* report unsupported. A backend with transfer_execute would add the
// three collective calls (docs/abi.md, "Prepared transfers (0.3)") and XMC_CAP_TRANSFER_PREPARED:
//   transfer_prepare: execute's checks and agreement once, then a copy of the args, plan and
//     layouts (and what it opened) in a handle it keeps in a live set, as handles must be looked up;
//   transfer_run: a handle not in the set is XMC_ERR_INVALID_HANDLE; each rank checks its buffers are
//     still the prepared ones (else every rank XMC_ERR_STALE) and the ranks agree on which handle and
//     which run (else XMC_ERR_REFUSED), before any write; then execute's data movement over the copy;
//   transfer_release: closes what prepare opened and drops the handle; close releases any left over
//     and counts them in xmc_close_report.prepared_transfers.
extern "C" XMC_EXPORT const xmc_backend *xmc_backend_entry(uint32_t abi) {
    if (abi != XMC_ABI_VERSION) return nullptr;
    static const xmc_backend t = [] {
        xmc_backend b{};
        b.abi_version = XMC_ABI_VERSION;
        b.struct_size = sizeof b;
        b.name = "example";
        b.version = "1.0";
        b.capabilities = XMC_CAP_PIN;
        b.open = open; b.close = close; b.device_count = device_count; b.device_info = device_info;
        b.last_error = last_error; b.status_name = status_name;
        b.pin_alloc = pin_alloc; b.pin_free = pin_free; b.pin_query = pin_query; b.pin_stats = pin_stats;
        b.pin_min_alignment = pin_min_alignment; b.close_report = close_report;
        return b;
    }();
    return &t;
}
