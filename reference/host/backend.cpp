// The host backend's table, instances and its one device (the host itself).
#include "host.hpp"

#include <cstddef>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

namespace xmc::host {
namespace {
xmc_instance *create() {
    auto *in = new (std::nothrow) Instance();
    if (in) in->vmm = vmm_create();
    return in;
}
bool option(xmc_instance *inst, const std::string &key, const std::string &value, xmc_status *st) {
    return vmm_option(static_cast<Instance *>(inst), key, value, st);  // slots' options are the only ones
}
xmc_status release_objects(xmc_instance *inst, uint64_t *slots) {
    auto *in = static_cast<Instance *>(inst);
    graph_close(in);
    *slots = vmm_close(in);
    // Then the streams, drained: no queued copy reads a block the last close releases.
    in->stop_streams();
    return XMC_OK;
}
// PIN-CLOSE, REG-CLOSE: the open instances of this library (no driver to count them).
std::mutex instances_mu;
size_t open_instances = 0;
size_t count(int delta) {
    std::lock_guard<std::mutex> lock(instances_mu);
    open_instances = static_cast<size_t>(static_cast<long long>(open_instances) + delta);
    return open_instances;
}
xmc_status release_driver(xmc_instance *) { return XMC_OK; }  // no contexts on the host
void destroy(xmc_instance *inst) { delete static_cast<Instance *>(inst); }
const be::InstanceOps kInstanceOps{create, option, release_objects, count, release_driver, destroy};
} // namespace

XMC_INSTANCE_ENTRIES(kInstanceOps, (void)0, registrations)

xmc_status device_count(xmc_instance *inst, int32_t *count) { return be::device_count(inst, count, 1); }

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
    t.version = "0.3.0";
    t.capabilities = XMC_CAP_PIN | XMC_CAP_PIN_REFS | XMC_CAP_REGISTER | XMC_CAP_REGISTER_PORTABLE | XMC_CAP_STREAM |
                     XMC_CAP_COPY | XMC_CAP_TRANSFER | XMC_CAP_VMM | XMC_CAP_GRAPH |
                     XMC_CAP_TRANSFER_PREPARED;
    XMC_HOST_GROUPS(XMC_FILL_GROUP)
    XMC_FILL_ERRORS(t)
}

} // namespace xmc::host
