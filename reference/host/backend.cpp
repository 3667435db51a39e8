// The host backend's table, instances and its one device (the host itself).
#include "host.hpp"

#include <cstddef>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

namespace xmc::host {
namespace {
// PIN-CLOSE, REG-CLOSE: the open instances of this library. One lock over
// open's count and the whole of a close, so that of two instances closed at
// once exactly one is the last.
std::mutex instances_mu;
size_t open_instances = 0;
} // namespace

xmc_status open(const xmc_open_params *params, xmc_instance **out) {
    if (!out) return XMC_ERR_INVALID_ARGUMENT;
    // Every member of ABI version 1 must be there: a smaller struct_size would
    // make `options` a read past the caller's structure. Larger: a newer
    // caller, its extra members ignored.
    // CORE-INSTANCE: refuses a NULL result and a struct too small for ABI 1.
    if (params && params->struct_size < offsetof(xmc_open_params, options) + sizeof params->options)
        return XMC_ERR_INVALID_ARGUMENT;
    auto *in = new (std::nothrow) Instance();
    if (!in) return XMC_ERR_OUT_OF_MEMORY;
    in->vmm = vmm_create();
    // CORE-INSTANCE: an unknown key or a bad value refuses the open.
    // "key=value;key=value": every key must be one of a primitive's options.
    std::string opts = params && params->options ? params->options : "";
    for (size_t at = 0; at < opts.size();) {
        size_t end = opts.find(';', at);
        if (end == std::string::npos) end = opts.size();
        const std::string kv = opts.substr(at, end - at);
        at = end + 1;
        if (kv.empty()) continue;
        const size_t eq = kv.find('=');
        xmc_status st = XMC_ERR_INVALID_ARGUMENT;
        if (eq == std::string::npos || !vmm_option(in, kv.substr(0, eq), kv.substr(eq + 1), &st) || st != XMC_OK) {
            vmm_close(in);
            delete in;
            return XMC_ERR_INVALID_ARGUMENT;  // unknown key or bad value
        }
    }
    std::lock_guard<std::mutex> lock(instances_mu);
    ++open_instances;
    *out = in;
    return XMC_OK;
}

xmc_status close_report(xmc_instance *inst, xmc_close_report *out) {
    if (!inst) return XMC_ERR_INVALID_HANDLE;
    auto *in = static_cast<Instance *>(inst);
    std::lock_guard<std::mutex> lock(instances_mu);
    graph_close(in);  // launches first: they may read and write slots
    xmc_close_report report{};
    report.slots = vmm_close(in);  // slots next: their copies and callbacks need the streams
    delete in;                     // then the streams, drained: no queued copy reads a block released below
    --open_instances;
    // PIN-CLOSE, REG-CLOSE: the process-wide registries outlive an instance;
    // the last one's close empties them. Registrations first: their munlock
    // keeps the pages of live pinned blocks locked. Neither can fail on the
    // host (no driver to refuse; reg_release_all says why), and the instance
    // is gone: nothing to record an error on.
    if (open_instances == 0) {
        xmc_status st = reg_release_all(nullptr, &report.registrations);
        if (st == XMC_OK)
            st = be::PinRegistry::process().release_all(nullptr, "close", &report.pinned_blocks, &report.pinned_bytes);
        if (st != XMC_OK) return st;
        report.last_instance = 1;
    }
    if (out) *out = report;
    return XMC_OK;
}

// The same as close_report, without the report.
xmc_status close(xmc_instance *inst) { return close_report(inst, nullptr); }

xmc_status device_count(xmc_instance *inst, int32_t *count) {
    if (!count) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "device_count", "device_count: NULL result");
    *count = 1;
    return XMC_OK;
}

xmc_status device_info(xmc_instance *inst, int32_t index, xmc_device_info *out) {
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "device_info", "device_info: NULL result");
    // CORE-INSTANCE: any index but 0 is no device (the host has one).
    if (index != 0)
        return be::fail(inst, XMC_ERR_NO_DEVICE, 0, "device_info", "device_info: no device %d (the host has one)", index);
    *out = xmc_device_info{};
    out->index = 0;
    // REG-UUID: the host's one device has one fixed UUID.
    std::memcpy(out->uuid, "xmc-host-device0", 16);
    std::strcpy(out->name, "host memory");
    return XMC_OK;
}

void fill_table(xmc_backend &t) {
    t.abi_version = XMC_ABI_VERSION;
    t.struct_size = sizeof(xmc_backend);
    t.name = "host";
    t.version = "0.2.0";
    t.capabilities = XMC_CAP_PIN | XMC_CAP_PIN_REFS | XMC_CAP_REGISTER | XMC_CAP_REGISTER_PORTABLE | XMC_CAP_STREAM |
                     XMC_CAP_COPY | XMC_CAP_TRANSFER | XMC_CAP_VMM | XMC_CAP_GRAPH;
    XMC_HOST_GROUPS(XMC_FILL_GROUP)
    XMC_FILL_ERRORS(t)
}

} // namespace xmc::host
