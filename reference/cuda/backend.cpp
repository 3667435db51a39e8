// The CUDA backend's table, instances and devices. open() succeeds without a
// driver (the device count is then 0 and the reason is in every refusal), so
// qualification can report what is unavailable instead of failing to start.
#include "cuda.hpp"

#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace xmc::cuda {

xmc_status open(const xmc_open_params *params, xmc_instance **out) {
    if (!out) return XMC_ERR_INVALID_ARGUMENT;
    // Every member of ABI version 1 must be there (a smaller struct_size would
    // make `options` a read past the caller's structure); larger is a newer caller.
    // CORE-INSTANCE: refuses a NULL result and a struct too small for ABI 1.
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
        // CORE-INSTANCE: an unknown key or a bad value refuses the open.
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

xmc_status close_report(xmc_instance *inst, xmc_close_report *out) {
    if (!inst) return XMC_ERR_INVALID_HANDLE;
    // One close at a time: of two instances closed at once, exactly one is the last.
    static std::mutex close_mu;
    std::lock_guard<std::mutex> closing(close_mu);
    graph_close(static_cast<Instance *>(inst));  // launches first: they may read and write slots
    auto *in = static_cast<Instance *>(inst);
    xmc_close_report report{};
    // Slots next: their copies and callbacks need the streams. Then its streams, events and
    // allocations. A failed release keeps the instance open with what is left, so that closing
    // again finishes.
    const char *what = "";
    CUresult failed = CUDA_SUCCESS;
    report.slots = vmm_close(in, &failed, &what);
    if (failed != CUDA_SUCCESS) return driver_fail(inst, failed, "close", what);
    nccl_close(in);  // communicators before the streams and contexts they were made on
    if (CUresult r = in->release_all(&what); r != CUDA_SUCCESS) return driver_fail(inst, r, "close", what);
    Driver &d = Driver::get();
    bool last = false;
    {
        std::lock_guard<std::mutex> lock(d.mu);
        last = d.instances == 1;
    }
    // PIN-CLOSE, REG-CLOSE: the last instance empties the process-wide
    // registries, registrations first, then pinned blocks (the release hook
    // unregisters a block registered with a device), while the contexts are
    // still retained. A driver refusal keeps the instance open, as above.
    if (last) {
        if (xmc_status st = reg_release_all(inst, &report.registrations); st != XMC_OK) return st;
        if (xmc_status st = be::PinRegistry::process().release_all(inst, "close", &report.pinned_blocks,
                                                                  &report.pinned_bytes);
            st != XMC_OK)
            return st;
    }
    {
        std::lock_guard<std::mutex> lock(d.mu);
        --d.instances;
    }
    if (CUresult r = d.release_if_idle(); r != CUDA_SUCCESS) {
        {
            std::lock_guard<std::mutex> lock(d.mu);
            ++d.instances;
        }
        return driver_fail(inst, r, "close", "cuDevicePrimaryCtxRelease");
    }
    delete in;
    report.last_instance = last ? 1 : 0;
    if (out) *out = report;
    return XMC_OK;
}

// The same as close_report, without the report.
xmc_status close(xmc_instance *inst) { return close_report(inst, nullptr); }

xmc_status device_count(xmc_instance *inst, int32_t *count) {
    if (!count) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "device_count", "device_count: NULL result");
    *count = static_cast<int32_t>(Driver::get().devices.size());  // 0 without a usable driver
    return XMC_OK;
}

xmc_status device_info(xmc_instance *inst, int32_t index, xmc_device_info *out) {
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "device_info", "device_info: NULL result");
    Driver &d = Driver::get();
    // CORE-INSTANCE: no driver: no device, with the reason; else check_device.
    if (!d.usable)
        return be::fail(inst, XMC_ERR_NO_DEVICE, 0, "device_info", "device_info: no device %d: %s", index,
                        d.why.c_str());
    if (xmc_status st = check_device(inst, index, "device_info"); st != XMC_OK) return st;
    const Device &dev = d.devices[static_cast<size_t>(index)];
    *out = xmc_device_info{};
    out->index = index;
    std::memcpy(out->uuid, dev.uuid.bytes, sizeof out->uuid);
    std::snprintf(out->name, sizeof out->name, "%s", dev.name);
    out->total_memory = dev.total;
    return XMC_OK;
}

Instance::Instance() = default;

void fill_table(xmc_backend &t) {
    t.abi_version = XMC_ABI_VERSION;
    t.struct_size = sizeof(xmc_backend);
    t.name = "cuda";
    t.version = "0.2.0";
    // Declared whatever the driver: a missing driver, device or entry point is
    // reported by the calls (unsupported), never by hiding the capability.
    t.capabilities = XMC_CAP_PIN | XMC_CAP_PIN_REFS | XMC_CAP_PIN_REGISTER | XMC_CAP_REGISTER |
                     XMC_CAP_REGISTER_PORTABLE | XMC_CAP_STREAM | XMC_CAP_COPY | XMC_CAP_VMM | XMC_CAP_TRANSFER | XMC_CAP_GRAPH;
    XMC_CUDA_GROUPS(XMC_FILL_GROUP)
    XMC_FILL_ERRORS(t)
}

} // namespace xmc::cuda
