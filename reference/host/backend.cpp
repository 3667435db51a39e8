// The host backend's table, instances and its one device (the host itself).
#include "host.hpp"

#include <cstring>
#include <new>

namespace xmc::host {

static xmc_status open(const xmc_open_params *params, xmc_instance **out) {
    if (!out) return XMC_ERR_INVALID_ARGUMENT;
    if (params && params->struct_size < sizeof(uint32_t)) return XMC_ERR_INVALID_ARGUMENT;
    if (params && params->options && *params->options)
        return XMC_ERR_INVALID_ARGUMENT;  // the host backend takes no options yet
    *out = new (std::nothrow) Instance();
    return *out ? XMC_OK : XMC_ERR_OUT_OF_MEMORY;
}

static xmc_status close(xmc_instance *inst) {
    if (!inst) return XMC_ERR_INVALID_HANDLE;
    delete static_cast<Instance *>(inst);
    return XMC_OK;
}

static xmc_status device_count(xmc_instance *inst, int32_t *count) {
    if (!count) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "device_count", "device_count: NULL result");
    *count = 1;
    return XMC_OK;
}

static xmc_status device_info(xmc_instance *inst, int32_t index, xmc_device_info *out) {
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "device_info", "device_info: NULL result");
    if (index != 0)
        return be::fail(inst, XMC_ERR_NO_DEVICE, 0, "device_info", "device_info: no device %d (the host has one)", index);
    *out = xmc_device_info{};
    out->index = 0;
    std::memcpy(out->uuid, "xmc-host-device0", 16);
    std::strcpy(out->name, "host memory");
    return XMC_OK;
}

void fill_table(xmc_backend &t) {
    t.abi_version = XMC_ABI_VERSION;
    t.struct_size = sizeof(xmc_backend);
    t.name = "host";
    t.version = "0.1.0";
    t.capabilities = XMC_CAP_PIN | XMC_CAP_PIN_REFS;
    t.open = open;
    t.close = close;
    t.device_count = device_count;
    t.device_info = device_info;
    t.last_error = be::last_error;
    t.status_name = be::status_name;
    t.pin_alloc = pin_alloc;
    t.pin_free = pin_free;
    t.pin_query = pin_query;
    t.pin_stats = pin_stats;
    t.pin_ref = pin_ref;
    t.pin_unref = pin_unref;
}

} // namespace xmc::host
