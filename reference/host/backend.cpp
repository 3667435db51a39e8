// The host backend's table, instances and its one device (the host itself).
#include "host.hpp"

#include <cstddef>
#include <cstring>
#include <new>
#include <string>

namespace xmc::host {

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
    *out = in;
    return XMC_OK;
}

xmc_status close(xmc_instance *inst) {
    if (!inst) return XMC_ERR_INVALID_HANDLE;
    vmm_close(static_cast<Instance *>(inst));  // slots first: their copies and callbacks need the streams
    delete static_cast<Instance *>(inst);
    return XMC_OK;
}

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
                     XMC_CAP_COPY | XMC_CAP_TRANSFER | XMC_CAP_VMM;
    XMC_HOST_GROUPS(XMC_FILL_GROUP)
    XMC_FILL_ERRORS(t)
}

} // namespace xmc::host
