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

namespace {
xmc_instance *create() {
    install_pin_hook();
    auto *in = new (std::nothrow) Instance();
    if (in) in->vmm = vmm_create();
    return in;
}
bool option(xmc_instance *inst, const std::string &key, const std::string &value, xmc_status *st) {
    return vmm_option(static_cast<Instance *>(inst), key, value, st);  // slots' vmm_workers is the only option
}
xmc_status release_objects(xmc_instance *inst, uint64_t *slots) {
    auto *in = static_cast<Instance *>(inst);
    graph_close(in);
    const char *what = "";
    CUresult failed = CUDA_SUCCESS;
    *slots = vmm_close(in, &failed, &what);
    if (failed != CUDA_SUCCESS) return driver_fail(inst, failed, "close", what);
    nccl_close(in);  // communicators before the streams and contexts they were made on
    if (CUresult r = in->release_all(&what); r != CUDA_SUCCESS) return driver_fail(inst, r, "close", what);
    return XMC_OK;
}
size_t count(int delta) { return be::count_instances(Driver::get().mu, Driver::get().instances, delta); }
xmc_status release_driver(xmc_instance *inst) {
    if (CUresult r = Driver::get().release_if_idle(); r != CUDA_SUCCESS)
        return driver_fail(inst, r, "close", "cuDevicePrimaryCtxRelease");
    return XMC_OK;
}
void destroy(xmc_instance *inst) { delete static_cast<Instance *>(inst); }
const be::InstanceOps kInstanceOps{create, option, release_objects, count, release_driver, destroy};
} // namespace

// Driver::get() loads the driver (or records why not) before the first instance.
XMC_INSTANCE_ENTRIES(kInstanceOps, Driver::get(), registrations)

xmc_status device_count(xmc_instance *inst, int32_t *count) {
    return be::device_count(inst, count, Driver::get().devices.size());  // 0 without a usable driver
}

xmc_status device_info(xmc_instance *inst, int32_t index, xmc_device_info *out) {
    Driver &d = Driver::get();
    return be::device_info(inst, index, out, d.usable, d.why, d.devices.size(), [&](xmc_device_info *info) {
        const Device &dev = d.devices[static_cast<size_t>(index)];
        std::memcpy(info->uuid, dev.uuid.bytes, sizeof info->uuid);
        std::snprintf(info->name, sizeof info->name, "%s", dev.name);
        info->total_memory = dev.total;
    });
}

Instance::Instance() = default;

void fill_table(xmc_backend &t) {
    t.abi_version = XMC_ABI_VERSION;
    t.struct_size = sizeof(xmc_backend);
    t.name = "cuda";
    t.version = "0.3.0";
    // Declared whatever the driver: a missing driver, device or entry point is
    // reported by the calls (unsupported), never by hiding the capability.
    t.capabilities = XMC_CAP_PIN | XMC_CAP_PIN_REFS | XMC_CAP_PIN_REGISTER | XMC_CAP_REGISTER |
                     XMC_CAP_REGISTER_PORTABLE | XMC_CAP_STREAM | XMC_CAP_COPY | XMC_CAP_VMM | XMC_CAP_TRANSFER | XMC_CAP_GRAPH |
                     XMC_CAP_TRANSFER_PREPARED;
    XMC_CUDA_GROUPS(XMC_FILL_GROUP)
    XMC_FILL_ERRORS(t)
}

} // namespace xmc::cuda
