// The Level Zero backend's table, instances and devices. open() succeeds
// without a loader or a device (the device count is then 0 and the reason is
// in every refusal), so qualification can report what is unavailable instead
// of failing to start.
#include "ze.hpp"

#include <cstdio>
#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace xmc::ze {

static xmc_status open(const xmc_open_params *params, xmc_instance **out) {
    if (!out) return XMC_ERR_INVALID_ARGUMENT;
    // Every member of ABI version 1 must be there (a smaller struct_size would
    // make `options` a read past the caller's structure); larger is a newer caller.
    if (params && params->struct_size < offsetof(xmc_open_params, options) + sizeof params->options)
        return XMC_ERR_INVALID_ARGUMENT;
    // "key=value;key=value": slots' vmm_workers is the only option.
    const std::string opts = params && params->options ? params->options : "";
    std::vector<std::pair<std::string, std::string>> kvs;
    for (size_t at = 0; at < opts.size();) {
        size_t end = opts.find(';', at);
        if (end == std::string::npos) end = opts.size();
        const std::string kv = opts.substr(at, end - at);
        at = end + 1;
        if (kv.empty()) continue;
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) return XMC_ERR_INVALID_ARGUMENT;
        kvs.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    Driver &d = Driver::get();
    install_pin_hook();
    auto *in = new (std::nothrow) Instance();
    if (!in) return XMC_ERR_OUT_OF_MEMORY;
    in->vmm = vmm_create();
    for (const auto &[k, v] : kvs) {
        xmc_status st = XMC_ERR_INVALID_ARGUMENT;
        if (!vmm_option(in, k, v, &st) || st != XMC_OK) {
            delete in;
            return XMC_ERR_INVALID_ARGUMENT;  // unknown key or bad value
        }
    }
    *out = in;
    std::lock_guard<std::mutex> lock(d.mu);
    ++d.instances;
    return XMC_OK;
}

static xmc_status close(xmc_instance *inst) {
    if (!inst) return XMC_ERR_INVALID_HANDLE;
    auto *in = static_cast<Instance *>(inst);
    // Slots first: their copies and stream points need the streams.
    vmm_close(in);
    // Its streams, events and allocations next. A failed release keeps the
    // instance open with what is left, so that closing again finishes.
    const char *what = "";
    if (ze_result_t r = in->release_all(&what); r != ZE_RESULT_SUCCESS) return driver_fail(inst, r, "close", what);
    // The slot requests' events last: a stream could still wait on them.
    if (ze_result_t r = vmm_release_events(in); r != ZE_RESULT_SUCCESS)
        return driver_fail(inst, r, "close", "zeEventDestroy/zeEventPoolDestroy of a slot request's events");
    Driver &d = Driver::get();
    {
        std::lock_guard<std::mutex> lock(d.mu);
        --d.instances;
    }
    // Then the contexts, if nothing else needs them. A context the driver
    // refused to destroy stays cached, and so does the instance: it counts
    // again, and closing again destroys what is left.
    if (ze_result_t r = d.release_if_idle(); r != ZE_RESULT_SUCCESS) {
        {
            std::lock_guard<std::mutex> lock(d.mu);
            ++d.instances;
        }
        return driver_fail(inst, r, "close", "zeContextDestroy");
    }
    delete in;
    return XMC_OK;
}

static xmc_status device_count(xmc_instance *inst, int32_t *count) {
    if (!count) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "device_count", "device_count: NULL result");
    *count = static_cast<int32_t>(Driver::get().devices.size());  // 0 without a usable driver
    return XMC_OK;
}

static xmc_status device_info(xmc_instance *inst, int32_t index, xmc_device_info *out) {
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "device_info", "device_info: NULL result");
    Driver &d = Driver::get();
    if (!d.usable)
        return be::fail(inst, XMC_ERR_NO_DEVICE, 0, "device_info", "device_info: no device %d: %s", index,
                        d.why.c_str());
    if (xmc_status st = check_device(inst, index, "device_info"); st != XMC_OK) return st;
    const Device &dev = d.devices[static_cast<size_t>(index)];
    *out = xmc_device_info{};
    out->index = index;
    std::memcpy(out->uuid, dev.uuid, sizeof out->uuid);
    std::snprintf(out->name, sizeof out->name, "%s", dev.name);
    out->total_memory = dev.total;
    return XMC_OK;
}

Instance::Instance() = default;

void fill_table(xmc_backend &t) {
    t.abi_version = XMC_ABI_VERSION;
    t.struct_size = sizeof(xmc_backend);
    t.name = "level_zero";
    t.version = "0.1.0";
    // Declared whatever the driver: a missing loader, device, extension or
    // entry point is reported by the calls (unsupported), never by hiding the
    // capability.
    t.capabilities = XMC_CAP_PIN | XMC_CAP_PIN_REFS | XMC_CAP_PIN_REGISTER | XMC_CAP_REGISTER | XMC_CAP_STREAM |
                     XMC_CAP_COPY | XMC_CAP_VMM;
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

} // namespace xmc::ze
