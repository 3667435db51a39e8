// open and close (CORE-INSTANCE, PIN-CLOSE, REG-CLOSE), written once for every platform: open's
// argument checks and options, and the close order. A platform supplies InstanceOps: how to make
// and release its instance's own objects and what its driver holds for every instance.
#pragma once
#include "errors.hpp"
#include "registration.hpp"

#include <xmc/backend.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace xmc::be {

struct InstanceOps {
    // A new instance, or nullptr (out of memory).
    xmc_instance *(*create)();
    // One open option `key=value` (the slots' vmm_workers, ...): false when the key is unknown;
    // *st says whether the value is good.
    bool (*option)(xmc_instance *inst, const std::string &key, const std::string &value, xmc_status *st);
    // Everything of the instance's own, in order: graphs (their launches may read and write slots),
    // slots (their copies and callbacks need the streams), then streams, events, allocations.
    // *slots: the slots it closed. A driver refusal is recorded as close's and returned: the
    // instance stays open with what is left, so that closing again finishes.
    xmc_status (*release_objects)(xmc_instance *inst, uint64_t *slots);
    // Adds delta to the count of open instances (under the driver's lock) and returns the count.
    size_t (*count)(int delta);
    // When no instance is left: what the driver holds for them all (retained contexts), unless
    // a registration still needs it; a refusal is recorded as close's.
    xmc_status (*release_driver)(xmc_instance *inst);
    void (*destroy)(xmc_instance *inst);
};

// CORE-INSTANCE: refuses a NULL result and a struct too small for ABI 1 (a smaller struct_size
// would make `options` a read past the caller's structure; larger is a newer caller, its extra
// members ignored); "key=value;key=value": an unknown key or a bad value refuses the open.
xmc_status open_instance(const xmc_open_params *params, xmc_instance **out, const InstanceOps &ops);

// The close order. One close at a time, so that of two instances closed at once exactly one is
// the last. The last instance empties the process-wide registries, registrations first (a host
// munlock keeps the pages of live pinned blocks; a pinned block's own registration goes with it),
// then pinned blocks, while the driver's contexts are still held; then the driver's contexts.
xmc_status close_instance(xmc_instance *inst, xmc_close_report *out, const InstanceOps &ops,
                          Registrations &registrations);

// The count of open instances kept by a platform's driver table (`instances`, under `mu`):
// InstanceOps::count for a platform with a driver.
inline size_t count_instances(std::mutex &mu, int &instances, int delta) {
    std::lock_guard<std::mutex> lock(mu);
    instances += delta;
    return static_cast<size_t>(instances);
}

// device_count's NULL check; `n` devices (0 without a usable driver).
inline xmc_status device_count(xmc_instance *inst, int32_t *count, size_t n) {
    if (!count) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "device_count", "device_count: NULL result");
    *count = static_cast<int32_t>(n);
    return XMC_OK;
}

// device_info of a platform with a driver: NULL refused; CORE-INSTANCE: without a usable driver
// no device, with the reason (`why`); an index outside [0, n) no device; else *out zeroed with
// its index and `fill(out)` adds the device's own (uuid, name, total_memory).
template <class Fill>
xmc_status device_info(xmc_instance *inst, int32_t index, xmc_device_info *out, bool usable, const std::string &why,
                       size_t n, Fill fill) {
    if (!out) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "device_info", "device_info: NULL result");
    if (!usable)
        return fail(inst, XMC_ERR_NO_DEVICE, 0, "device_info", "device_info: no device %d: %s", index, why.c_str());
    if (xmc_status st = check_device_index(inst, index, n, "device_info"); st != XMC_OK) return st;
    *out = xmc_device_info{};
    out->index = index;
    fill(out);
    return XMC_OK;
}

} // namespace xmc::be

// open, close_report and close of a platform over its InstanceOps `ops` and its registrations();
// `prepare` runs first in open (a platform loads its driver there, or records why not).
#define XMC_INSTANCE_ENTRIES(ops, prepare, regs)                                                    \
    xmc_status open(const xmc_open_params *params, xmc_instance **out) {                            \
        prepare;                                                                                    \
        return ::xmc::be::open_instance(params, out, ops);                                          \
    }                                                                                               \
    xmc_status close_report(xmc_instance *inst, xmc_close_report *out) {                            \
        return ::xmc::be::close_instance(inst, out, ops, regs());                                   \
    }                                                                                               \
    /* The same as close_report, without the report. */                                            \
    xmc_status close(xmc_instance *inst) { return close_report(inst, nullptr); }
