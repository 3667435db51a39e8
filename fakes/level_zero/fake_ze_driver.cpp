// Driver, devices, contexts, and the sysman memory state.
#include "fake_ze_entries.h"
#include "fake_ze_internal.h"
#include "ze_external_memmap.h"  // reference/level_zero: the extension the Debian header lacks

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace xmc_fake_ze {

namespace {

const ze_driver_handle_t kDriver = make_handle<ze_driver_handle_t>(Kind::Driver, 1);

// Standard "count, then fill" enumeration: *pCount == 0 (or no array) asks for the
// number; otherwise up to *pCount entries are written and *pCount says how many.
template <class T, class Fill>
ze_result_t enumerate(uint32_t* pCount, T* out, uint32_t available, Fill fill) {
    if (pCount == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (*pCount == 0 || out == nullptr) {
        *pCount = available;
        return ZE_RESULT_SUCCESS;
    }
    uint32_t n = std::min(*pCount, available);
    for (uint32_t i = 0; i < n; ++i) fill(out[i], i);
    *pCount = n;
    return ZE_RESULT_SUCCESS;
}

bool driver_ok(ze_driver_handle_t h) { return h == kDriver; }

void copy_name(char (&dst)[ZE_MAX_DEVICE_NAME], const std::string& s) {
    std::snprintf(dst, sizeof dst, "%s", s.c_str());
}

Device* sysman_memory_of(zes_mem_handle_t h) {
    uint64_t id = handle_id(h, Kind::SysmanMem);
    if (id == 0 || id > S().devices.size()) return nullptr;
    return &S().devices[id - 1];
}

ze_result_t create_context(const std::vector<uint32_t>& natives, ze_context_handle_t* phContext) {
    State& s = S();
    Context c;
    c.id = s.next_id++;
    c.devices = natives;
    c.first = natives.empty() ? 0 : natives.front();  // a driver with no device (XMC_FAKE_ZE_DEVICES=0)
    for (uint32_t n : natives)
        if (s.devices[n].position < s.devices[c.first].position) c.first = n;
    s.contexts[c.id] = c;
    *phContext = make_handle<ze_context_handle_t>(Kind::Context, c.id);
    return ZE_RESULT_SUCCESS;
}

}  // namespace

Device* device_of(ze_device_handle_t h) {
    uint64_t id = handle_id(h, Kind::Device);
    if (id == 0 || id > S().devices.size() || !S().initialized) return nullptr;
    return &S().devices[id - 1];
}

ze_device_handle_t device_handle(uint32_t native) {
    return make_handle<ze_device_handle_t>(Kind::Device, uint64_t(native) + 1);
}

Context* context_of(ze_context_handle_t h) {
    auto it = S().contexts.find(handle_id(h, Kind::Context));
    return it == S().contexts.end() ? nullptr : &it->second;
}

bool context_has(const Context& c, uint32_t native) {
    return std::find(c.devices.begin(), c.devices.end(), native) != c.devices.end();
}

// ---------------------------------------------------------------------------------
// zeInit. The loader calls it twice: once when it checks the driver, once for the
// program's zeInit. Both succeed unless the environment was malformed.
ze_result_t ZE_APICALL Init(ze_init_flags_t flags) {
    FaultOutcome f = enter("zeInit");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.config_result != ZE_RESULT_SUCCESS) return s.config_result;
    // The fake's devices are GPUs: a VPU-only init finds none.
    if (flags != 0 && (flags & ZE_INIT_FLAG_GPU_ONLY) == 0) return ZE_RESULT_ERROR_UNINITIALIZED;
    s.initialized = true;
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL DriverGet(uint32_t* pCount, ze_driver_handle_t* phDrivers) {
    FaultOutcome f = enter("zeDriverGet");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    if (!S().initialized) return ZE_RESULT_ERROR_UNINITIALIZED;
    return enumerate(pCount, phDrivers, 1, [](ze_driver_handle_t& out, uint32_t) { out = kDriver; });
}

ze_result_t ZE_APICALL DriverGetApiVersion(ze_driver_handle_t hDriver, ze_api_version_t* version) {
    FaultOutcome f = enter("zeDriverGetApiVersion");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    if (!driver_ok(hDriver)) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (version == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    *version = ZE_API_VERSION_CURRENT;
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL DriverGetProperties(ze_driver_handle_t hDriver, ze_driver_properties_t* p) {
    FaultOutcome f = enter("zeDriverGetProperties");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    if (!driver_ok(hDriver)) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (p == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    static const char kUuid[ZE_MAX_DRIVER_UUID_SIZE + 1] = "xmcfakezedriver1";
    std::memcpy(p->uuid.id, kUuid, ZE_MAX_DRIVER_UUID_SIZE);
    p->driverVersion = 1;
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL DriverGetExtensionProperties(ze_driver_handle_t hDriver, uint32_t* pCount,
                                                    ze_driver_extension_properties_t* props) {
    FaultOutcome f = enter("zeDriverGetExtensionProperties");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    if (!driver_ok(hDriver)) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    return enumerate(pCount, props, 1, [](ze_driver_extension_properties_t& e, uint32_t) {
        std::snprintf(e.name, sizeof e.name, "%s", XMC_ZE_EXTERNAL_MEMMAP_SYSMEM_EXT_NAME);
        e.version = XMC_ZE_EXTERNAL_MEMMAP_SYSMEM_EXT_VERSION_1_0;
    });
}

// ---------------------------------------------------------------------------------
// Devices.
ze_result_t ZE_APICALL DeviceGet(ze_driver_handle_t hDriver, uint32_t* pCount,
                                 ze_device_handle_t* phDevices) {
    FaultOutcome f = enter("zeDeviceGet");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    if (!driver_ok(hDriver)) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.initialized) return ZE_RESULT_ERROR_UNINITIALIZED;
    return enumerate(pCount, phDevices, static_cast<uint32_t>(s.order.size()),
                     [&](ze_device_handle_t& out, uint32_t pos) { out = device_handle(s.order[pos]); });
}

ze_result_t ZE_APICALL DeviceGetProperties(ze_device_handle_t hDevice, ze_device_properties_t* p) {
    FaultOutcome f = enter("zeDeviceGetProperties");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    Device* d = device_of(hDevice);
    if (d == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (p == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    p->type = ZE_DEVICE_TYPE_GPU;
    p->vendorId = 0x8086;
    p->deviceId = 0x0f00 + d->native;
    p->flags = 0;  // discrete GPU
    p->subdeviceId = 0;
    p->coreClockRate = 1000;
    p->maxMemAllocSize = d->total;
    p->maxHardwareContexts = 64;
    p->maxCommandQueuePriority = 0;
    p->numThreadsPerEU = 8;
    p->physicalEUSimdWidth = 8;
    p->numEUsPerSubslice = 8;
    p->numSubslicesPerSlice = 4;
    p->numSlices = 1;
    p->timerResolution = 1;
    p->timestampValidBits = 64;
    p->kernelTimestampValidBits = 32;
    // UUID: "xmcfakeze", six zero bytes, then the native index.
    std::memset(p->uuid.id, 0, sizeof p->uuid.id);
    std::memcpy(p->uuid.id, "xmcfakeze", 9);
    p->uuid.id[ZE_MAX_DEVICE_UUID_SIZE - 1] = static_cast<uint8_t>(d->native);
    copy_name(p->name, "xmc fake Level Zero device " + std::to_string(d->native));
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL DeviceGetMemoryProperties(ze_device_handle_t hDevice, uint32_t* pCount,
                                                 ze_device_memory_properties_t* props) {
    FaultOutcome f = enter("zeDeviceGetMemoryProperties");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    Device* d = device_of(hDevice);
    if (d == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    return enumerate(pCount, props, 1, [&](ze_device_memory_properties_t& m, uint32_t) {
        m.flags = 0;
        m.maxClockRate = 1000;
        m.maxBusWidth = 64;
        m.totalSize = d->total;
        copy_name(m.name, "HBM");
    });
}

// One group that does both compute and copy, with one queue.
ze_result_t ZE_APICALL DeviceGetCommandQueueGroupProperties(
    ze_device_handle_t hDevice, uint32_t* pCount, ze_command_queue_group_properties_t* props) {
    FaultOutcome f = enter("zeDeviceGetCommandQueueGroupProperties");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    if (device_of(hDevice) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    return enumerate(pCount, props, 1, [](ze_command_queue_group_properties_t& g, uint32_t) {
        g.flags = ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE | ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY;
        g.maxMemoryFillPatternSize = 16;
        g.numQueues = 1;
    });
}

// ---------------------------------------------------------------------------------
// Contexts.
ze_result_t ZE_APICALL ContextCreate(ze_driver_handle_t hDriver, const ze_context_desc_t* desc,
                                     ze_context_handle_t* phContext) {
    FaultOutcome f = enter("zeContextCreate");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    if (!driver_ok(hDriver)) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (desc == nullptr || phContext == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    std::lock_guard<std::mutex> lock(S().mu);
    if (!S().initialized) return ZE_RESULT_ERROR_UNINITIALIZED;
    return create_context(S().order, phContext);  // every device, in zeDeviceGet order
}

ze_result_t ZE_APICALL ContextCreateEx(ze_driver_handle_t hDriver, const ze_context_desc_t* desc,
                                       uint32_t numDevices, ze_device_handle_t* phDevices,
                                       ze_context_handle_t* phContext) {
    FaultOutcome f = enter("zeContextCreateEx");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    if (!driver_ok(hDriver)) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (desc == nullptr || phContext == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (numDevices > 0 && phDevices == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    std::lock_guard<std::mutex> lock(S().mu);
    if (!S().initialized) return ZE_RESULT_ERROR_UNINITIALIZED;
    if (numDevices == 0) return create_context(S().order, phContext);  // all devices
    std::vector<uint32_t> natives;
    for (uint32_t i = 0; i < numDevices; ++i) {
        Device* d = device_of(phDevices[i]);
        if (d == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
        if (std::find(natives.begin(), natives.end(), d->native) != natives.end())
            return ZE_RESULT_ERROR_INVALID_ARGUMENT;  // a device listed twice
        natives.push_back(d->native);
    }
    return create_context(natives, phContext);
}

// Refused with ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE while anything created in the
// context is alive (a real driver may free such objects silently; refusing shows the
// ordering bug and keeps the objects in the ledger).
ze_result_t ZE_APICALL ContextDestroy(ze_context_handle_t hContext) {
    FaultOutcome f = enter("zeContextDestroy");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    Context* c = context_of(hContext);
    if (c == nullptr) return hContext ? ZE_RESULT_ERROR_INVALID_ARGUMENT : ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    uint64_t id = c->id;
    bool used = false;
    for (const auto& [base, a] : s.allocs) used = used || a.ctx == id;
    for (const auto& [base, r] : s.reservations) used = used || r.ctx == id;
    for (const auto& [pid, p] : s.physmems) used = used || p.ctx == id;
    for (const auto& [lid, l] : s.lists) used = used || l->ctx == id;
    for (const auto& [qid, q] : s.queues) used = used || q->ctx == id;
    for (const auto& [pid, p] : s.pools) used = used || p.ctx == id;
    if (used) return ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
    s.contexts.erase(id);
    return ZE_RESULT_SUCCESS;
}

// ---------------------------------------------------------------------------------
// Sysman: one memory module per device; its state is the device's free memory.
ze_result_t ZE_APICALL SysmanDeviceEnumMemoryModules(zes_device_handle_t hDevice, uint32_t* pCount,
                                                     zes_mem_handle_t* phMemory) {
    FaultOutcome f = enter("zesDeviceEnumMemoryModules");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    Device* d = device_of(reinterpret_cast<ze_device_handle_t>(hDevice));
    if (d == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    return enumerate(pCount, phMemory, 1, [&](zes_mem_handle_t& out, uint32_t) {
        out = make_handle<zes_mem_handle_t>(Kind::SysmanMem, uint64_t(d->native) + 1);
    });
}

ze_result_t ZE_APICALL SysmanMemoryGetProperties(zes_mem_handle_t hMemory, zes_mem_properties_t* p) {
    FaultOutcome f = enter("zesMemoryGetProperties");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    Device* d = sysman_memory_of(hMemory);
    if (d == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (p == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    p->type = ZES_MEM_TYPE_HBM;
    p->onSubdevice = false;
    p->subdeviceId = 0;
    p->location = ZES_MEM_LOC_DEVICE;
    p->physicalSize = d->total;
    p->busWidth = 64;
    p->numChannels = 1;
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL SysmanMemoryGetState(zes_mem_handle_t hMemory, zes_mem_state_t* st) {
    FaultOutcome f = enter("zesMemoryGetState");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    Device* d = sysman_memory_of(hMemory);
    if (d == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (st == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    st->health = ZES_MEM_HEALTH_OK;
    st->free = d->total - d->used;
    st->size = d->total;
    return ZE_RESULT_SUCCESS;
}

}  // namespace xmc_fake_ze
