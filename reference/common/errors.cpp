#include "errors.hpp"

#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

namespace {
std::atomic<uint64_t> next_id{1};
// Thread-local so concurrent calls never see each other's errors; keyed by
// instance id (never reused) so a closed instance's slot cannot alias a new one.
thread_local std::unordered_map<uint64_t, xmc_error_info> slots;

// The live instances of this library (instance_live). Leaked on purpose: an
// instance closed by a static destructor at exit must still find the set.
struct LiveSet {
    std::shared_mutex mu;
    std::unordered_set<const xmc_instance *> set;
};
LiveSet &live() {
    static LiveSet *l = new LiveSet;
    return *l;
}
} // namespace

xmc_instance::xmc_instance() : id(next_id.fetch_add(1)) {
    LiveSet &l = live();
    std::lock_guard<std::shared_mutex> lock(l.mu);
    l.set.insert(this);
}
xmc_instance::~xmc_instance() {
    LiveSet &l = live();
    std::lock_guard<std::shared_mutex> lock(l.mu);
    l.set.erase(this);
}

namespace xmc::be {

xmc_status fail(xmc_instance *inst, xmc_status status, int64_t native_code, const char *call,
                const char *fmt, ...) {
    xmc_error_info info{};
    info.status = status;
    info.native_code = native_code;
    std::snprintf(info.call, sizeof info.call, "%s", call);
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(info.message, sizeof info.message, fmt, ap);
    va_end(ap);
    if (inst) slots[inst->id] = info;
    return status;
}

void last_error(xmc_instance *inst, xmc_error_info *out) {
    if (!out) return;
    *out = xmc_error_info{};
    // CORE-INSTANCE: a dead instance's error is all zero, never a freed read.
    if (!instance_live(inst)) return;
    auto it = slots.find(inst->id);
    if (it != slots.end()) *out = it->second;
}

const char *status_name(xmc_status s) { return xmc_status_string(s); }

bool instance_live(const xmc_instance *inst) {
    if (!inst) return false;
    LiveSet &l = live();
    std::shared_lock<std::shared_mutex> lock(l.mu);
    return l.set.count(inst) != 0;
}

} // namespace xmc::be

namespace xmc::be {
namespace {

// The table as the backend filled it; the guarded table calls through it.
xmc_backend &inner_table() {
    static xmc_backend t{};
    return t;
}

// One wrapper per member: M is a pointer to an xmc_backend member whose type
// is a function pointer taking the instance first.
template <auto M> struct Guard;
template <class... A, xmc_status (*xmc_backend::*M)(xmc_instance *, A...)>
struct Guard<M> {
    static xmc_status call(xmc_instance *inst, A... args) {
        // CORE-INSTANCE: refused before the backend's function can touch it.
        if (!instance_live(inst)) return XMC_ERR_INVALID_HANDLE;
        return (inner_table().*M)(inst, args...);
    }
    static void wrap(xmc_backend &t) {
        if (t.*M) t.*M = &call;
    }
};

} // namespace

void guard_table(xmc_backend &t) {
    inner_table() = t;
    // Every entry point of kind I in the list (<xmc/backend.h>); the others
    // take no instance, or return no status to refuse with.
#define XMC_GUARD_I(name) Guard<&xmc_backend::name>::wrap(t);
#define XMC_GUARD_P(name)
#define XMC_GUARD_ENTRY_(kind, ret, name, params) XMC_GUARD_##kind(name)
#define XMC_GUARD_GROUP_(group) XMC_ENTRIES_##group(XMC_GUARD_ENTRY_)
    XMC_ENTRY_GROUPS(XMC_GUARD_GROUP_)
#undef XMC_GUARD_GROUP_
#undef XMC_GUARD_ENTRY_
#undef XMC_GUARD_P
#undef XMC_GUARD_I
}

xmc_status require_driver(xmc_instance *inst, const char *call, bool usable, const std::string &why,
                          const char *kind, const std::string &library, const std::string &missing) {
    if (!usable) return fail(inst, XMC_ERR_UNSUPPORTED, 0, call, "%s: %s", call, why.c_str());
    if (!missing.empty())
        return fail(inst, XMC_ERR_UNSUPPORTED, 0, call, "%s: the %s %s does not export %s", call, kind,
                    library.c_str(), missing.c_str());
    return XMC_OK;
}

xmc_status check_device_index(xmc_instance *inst, int32_t device, size_t count, const char *call) {
    if (device < 0 || static_cast<size_t>(device) >= count)
        return fail(inst, XMC_ERR_NO_DEVICE, 0, call, "%s: no device %d (the driver has %zu)", call, device, count);
    return XMC_OK;
}

} // namespace xmc::be
