// Loading Level Zero: dlopen of XMC_ZE_LOADER (default libze_loader.so.1),
// dlsym of each entry point, zeInit, then every device of every driver with
// its UUID, name, memory and whether its driver lists the external-memmap
// extension; the table is sorted by UUID (ze.hpp says why). Any failure
// leaves the driver "not usable" with the reason: the backend still opens,
// reports no device, and answers the calls that need the driver with
// XMC_ERR_UNSUPPORTED (REG-UNAVAILABLE). Contexts are created on first use
// and destroyed when no instance and no registration needs them.
#include "ze.hpp"
#include "driver_contexts.hpp"

#include "ze_external_memmap.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace xmc::ze {

namespace {

// Resolves one entry point; records the first missing one of its group.
template <class F>
void resolve_one(void *lib, const char *symbol, F *out, std::string *missing) {
    *out = reinterpret_cast<F>(dlsym(lib, symbol));
    if (!*out && missing->empty()) *missing = symbol;
}

std::string result_text(ze_result_t r) {
    char b[64];
    std::snprintf(b, sizeof b, "%s (0x%x)", result_name(r), static_cast<unsigned>(r));
    return b;
}

// REG-UNAVAILABLE: without the extension, registration is unsupported.
bool lists_memmap(Driver &d, ze_driver_handle_t drv) {
    uint32_t n = 0;
    if (d.zeDriverGetExtensionProperties(drv, &n, nullptr) != ZE_RESULT_SUCCESS) return false;
    std::vector<ze_driver_extension_properties_t> ext(n);
    if (n == 0 || d.zeDriverGetExtensionProperties(drv, &n, ext.data()) != ZE_RESULT_SUCCESS) return false;
    for (uint32_t i = 0; i < n; ++i)
        if (std::strcmp(ext[i].name, XMC_ZE_EXTERNAL_MEMMAP_SYSMEM_EXT_NAME) == 0) return true;
    return false;
}

// Fills name, UUID and memory of one device; a failing call names itself.
ze_result_t describe(Driver &d, Device *dev, std::string *what) {
    ze_device_properties_t p{};
    p.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
    *what = "zeDeviceGetProperties";
    if (ze_result_t r = d.zeDeviceGetProperties(dev->handle, &p); r != ZE_RESULT_SUCCESS) return r;
    std::memcpy(dev->uuid, p.uuid.id, sizeof dev->uuid);
    std::snprintf(dev->name, sizeof dev->name, "%.127s", p.name);  // ABI names hold 127 characters
    uint32_t n = 0;
    *what = "zeDeviceGetMemoryProperties";
    if (ze_result_t r = d.zeDeviceGetMemoryProperties(dev->handle, &n, nullptr); r != ZE_RESULT_SUCCESS) return r;
    std::vector<ze_device_memory_properties_t> mem(n);
    for (auto &m : mem) m.stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES;
    if (n > 0) {
        if (ze_result_t r = d.zeDeviceGetMemoryProperties(dev->handle, &n, mem.data()); r != ZE_RESULT_SUCCESS)
            return r;
    }
    for (uint32_t i = 0; i < n; ++i) dev->total += mem[i].totalSize;
    return ZE_RESULT_SUCCESS;
}

void load(Driver &d) {
    const char *env = std::getenv("XMC_ZE_LOADER");
    d.library = env && *env ? env : "libze_loader.so.1";
    void *lib = dlopen(d.library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *err = dlerror();
        d.why = "no Level Zero loader: dlopen(" + d.library + ") failed: " + (err ? err : "unknown error");
        return;
    }
    // Kept loaded for the process's life: drivers and their threads live in it.
    std::string missing_core;
#define XMC_ZE_CORE_ONE(name) resolve_one(lib, #name, &d.name, &missing_core);
#define XMC_ZE_REG_ONE(name) resolve_one(lib, #name, &d.name, &d.missing_register);
#define XMC_ZE_STREAM_ONE(name) resolve_one(lib, #name, &d.name, &d.missing_stream);
#define XMC_ZE_COPY_ONE(name) resolve_one(lib, #name, &d.name, &d.missing_copy);
#define XMC_ZE_VMM_ONE(name) resolve_one(lib, #name, &d.name, &d.missing_vmm);
#define XMC_ZE_GRAPH_ONE(name) resolve_one(lib, #name, &d.name, &d.missing_graph);
    XMC_ZE_CORE(XMC_ZE_CORE_ONE)
    XMC_ZE_REGISTER(XMC_ZE_REG_ONE)
    XMC_ZE_STREAM(XMC_ZE_STREAM_ONE)
    XMC_ZE_COPY(XMC_ZE_COPY_ONE)
    XMC_ZE_VMM(XMC_ZE_VMM_ONE)
    XMC_ZE_GRAPH(XMC_ZE_GRAPH_ONE)
    if (!missing_core.empty()) {
        d.why = d.library + " does not export " + missing_core + ", which the backend needs";
        return;
    }
    if (ze_result_t r = d.zeInit(ZE_INIT_FLAG_GPU_ONLY); r != ZE_RESULT_SUCCESS) {
        d.why = "zeInit(ZE_INIT_FLAG_GPU_ONLY) failed with " + result_text(r) + ": no Level Zero GPU driver";
        return;
    }
    uint32_t nd = 0;
    if (ze_result_t r = d.zeDriverGet(&nd, nullptr); r != ZE_RESULT_SUCCESS || nd == 0) {
        d.why = r != ZE_RESULT_SUCCESS ? "zeDriverGet failed with " + result_text(r) : "no driver: the loader reports none";
        return;
    }
    std::vector<ze_driver_handle_t> drivers(nd);
    if (ze_result_t r = d.zeDriverGet(&nd, drivers.data()); r != ZE_RESULT_SUCCESS) {
        d.why = "zeDriverGet failed with " + result_text(r);
        return;
    }
    uint32_t position = 0;
    for (ze_driver_handle_t drv : drivers) {
        const bool memmap = lists_memmap(d, drv);
        uint32_t n = 0;
        std::vector<ze_device_handle_t> handles;
        ze_result_t r = d.zeDeviceGet(drv, &n, nullptr);
        if (r == ZE_RESULT_SUCCESS) {
            handles.resize(n);
            r = n ? d.zeDeviceGet(drv, &n, handles.data()) : r;
        }
        if (r != ZE_RESULT_SUCCESS) {
            d.devices.clear();
            d.why = "zeDeviceGet failed with " + result_text(r);
            return;
        }
        for (ze_device_handle_t h : handles) {
            Device dev;
            dev.driver = drv;
            dev.handle = h;
            dev.memmap = memmap;
            dev.enum_position = position++;
            std::string what;
            if (ze_result_t rr = describe(d, &dev, &what); rr != ZE_RESULT_SUCCESS) {
                d.devices.clear();
                d.why = "describing device " + std::to_string(dev.enum_position) + ": " + what + " failed with " +
                        result_text(rr);
                return;
            }
            d.devices.push_back(dev);
        }
    }
    if (d.devices.empty()) {
        d.why = "no device: the Level Zero drivers report none";
        return;
    }
    // REG-UUID: device d is the same device whatever zeDeviceGet's order.
    // The xmc index is the rank in UUID order, whatever the enumeration order.
    std::sort(d.devices.begin(), d.devices.end(),
              [](const Device &a, const Device &b) { return std::memcmp(a.uuid, b.uuid, sizeof a.uuid) < 0; });
    d.usable = true;
}

} // namespace

Driver &Driver::get() {
    static Driver d;
    static std::once_flag once;
    std::call_once(once, [] { load(d); });
    return d;
}

ze_result_t Driver::context_for(const uint8_t uuid[16], ze_context_handle_t *out) {
    std::lock_guard<std::mutex> lock(mu);
    for (Device &dev : devices) {
        // REG-UUID: matched by UUID, never by position.
        if (std::memcmp(dev.uuid, uuid, sizeof dev.uuid) != 0) continue;
        if (!dev.ctx) {
            // REG-DEVICE: one context per device, never one shared by several.
            // This device alone: a registration in it is mapped for this device.
            ze_context_desc_t desc{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
            ze_device_handle_t one = dev.handle;
            if (ze_result_t r = zeContextCreateEx(dev.driver, &desc, 1, &one, &dev.ctx); r != ZE_RESULT_SUCCESS) {
                dev.ctx = nullptr;
                return r;
            }
        }
        *out = dev.ctx;
        return ZE_RESULT_SUCCESS;
    }
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;  // no device has this UUID
}

ze_result_t Driver::release_if_idle() {
    return be::release_if_idle(*this, ZE_RESULT_SUCCESS, [&](Device &dev) { return zeContextDestroy(dev.ctx); });
}

const char *result_name(ze_result_t r) {
    switch (r) {
#define XMC_ZE_NAME(n) case n: return #n;
    XMC_ZE_NAME(ZE_RESULT_SUCCESS)
    XMC_ZE_NAME(ZE_RESULT_NOT_READY)
    XMC_ZE_NAME(ZE_RESULT_ERROR_DEVICE_LOST)
    XMC_ZE_NAME(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)
    XMC_ZE_NAME(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)
    XMC_ZE_NAME(ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS)
    XMC_ZE_NAME(ZE_RESULT_ERROR_NOT_AVAILABLE)
    XMC_ZE_NAME(ZE_RESULT_ERROR_UNINITIALIZED)
    XMC_ZE_NAME(ZE_RESULT_ERROR_UNSUPPORTED_VERSION)
    XMC_ZE_NAME(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE)
    XMC_ZE_NAME(ZE_RESULT_ERROR_INVALID_ARGUMENT)
    XMC_ZE_NAME(ZE_RESULT_ERROR_INVALID_NULL_HANDLE)
    XMC_ZE_NAME(ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE)
    XMC_ZE_NAME(ZE_RESULT_ERROR_INVALID_NULL_POINTER)
    XMC_ZE_NAME(ZE_RESULT_ERROR_INVALID_SIZE)
    XMC_ZE_NAME(ZE_RESULT_ERROR_UNSUPPORTED_SIZE)
    XMC_ZE_NAME(ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT)
    XMC_ZE_NAME(ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT)
    XMC_ZE_NAME(ZE_RESULT_ERROR_INVALID_ENUMERATION)
    XMC_ZE_NAME(ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION)
    XMC_ZE_NAME(ZE_RESULT_ERROR_OVERLAPPING_REGIONS)
    XMC_ZE_NAME(ZE_RESULT_ERROR_UNKNOWN)
#undef XMC_ZE_NAME
    default: return "ze_result_t";
    }
}

xmc_status status_of(ze_result_t r) {
    switch (r) {
    case ZE_RESULT_SUCCESS: return XMC_OK;
    case ZE_RESULT_ERROR_UNSUPPORTED_FEATURE: return XMC_ERR_UNSUPPORTED;
    default: return XMC_ERR_DRIVER;
    }
}

xmc_status driver_fail(xmc_instance *inst, ze_result_t r, const char *call, const char *what) {
    return be::fail(inst, status_of(r), r, call, "%s: %s failed with %s (0x%x)", call, what, result_name(r),
                    static_cast<unsigned>(r));
}

xmc_status require(xmc_instance *inst, const char *call, const std::string &missing) {
    Driver &d = Driver::get();
    return be::require_driver(inst, call, d.usable, d.why, "loader", d.library, missing);
}

xmc_status check_device(xmc_instance *inst, int32_t device, const char *call) {
    return be::check_device_index(inst, device, Driver::get().devices.size(), call);
}

xmc_status device_context(xmc_instance *inst, const char *call, int32_t device, ze_context_handle_t *ctx) {
    Driver &d = Driver::get();
    if (ze_result_t r = d.context_for(d.devices[static_cast<size_t>(device)].uuid, ctx); r != ZE_RESULT_SUCCESS)
        return driver_fail(inst, r, call, "zeContextCreateEx");
    return XMC_OK;
}

} // namespace xmc::ze
