// The host backend's table, instances and its one device (the host itself).
#include "host.hpp"

#include <cstddef>
#include <cstring>
#include <new>
#include <string>

namespace xmc::host {

static xmc_status open(const xmc_open_params *params, xmc_instance **out) {
    if (!out) return XMC_ERR_INVALID_ARGUMENT;
    // Every member of ABI version 1 must be there: a smaller struct_size would
    // make `options` a read past the caller's structure. Larger: a newer
    // caller, its extra members ignored.
    if (params && params->struct_size < offsetof(xmc_open_params, options) + sizeof params->options)
        return XMC_ERR_INVALID_ARGUMENT;
    auto *in = new (std::nothrow) Instance();
    if (!in) return XMC_ERR_OUT_OF_MEMORY;
    in->vmm = vmm_create();
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

static xmc_status close(xmc_instance *inst) {
    if (!inst) return XMC_ERR_INVALID_HANDLE;
    vmm_close(static_cast<Instance *>(inst));  // slots first: their copies and callbacks need the streams
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
    t.capabilities = XMC_CAP_PIN | XMC_CAP_PIN_REFS | XMC_CAP_REGISTER | XMC_CAP_STREAM | XMC_CAP_COPY |
                     XMC_CAP_TRANSFER | XMC_CAP_VMM;
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
    t.reg_register = reg_register;
    t.reg_unregister = reg_unregister;
    t.reg_query = reg_query;
    t.reg_align_policy = reg_align_policy;
    t.stream_create = stream_create;
    t.stream_destroy = stream_destroy;
    t.stream_synchronize = stream_synchronize;
    t.event_create = event_create;
    t.event_destroy = event_destroy;
    t.event_record = event_record;
    t.event_synchronize = event_synchronize;
    t.stream_wait_event = stream_wait_event;
    t.host_callback = host_callback;
    t.dev_alloc = dev_alloc;
    t.dev_free = dev_free;
    t.copy = copy;
    t.transfer_execute = transfer_execute;
    t.slot_create = slot_create;
    t.slot_release = slot_release;
    t.slot_remap = slot_remap;
    t.slot_release_batch = slot_release_batch;
    t.slot_remap_batch = slot_remap_batch;
    t.request_launch_copy = request_launch_copy;
    t.request_wait = request_wait;
    t.request_adopt = request_adopt;
    t.request_query = request_query;
    t.request_stream_wait = request_stream_wait;
    t.request_destroy = request_destroy;
    t.slot_close = slot_close;
    t.device_free_memory = device_free_memory;
}

} // namespace xmc::host
