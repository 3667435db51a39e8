// The driver's DDI table getters: the 53 functions that the Level Zero loader (Debian
// 1.8.12) looks up in a driver. Each must exist and succeed, or the loader skips the
// driver. Each zeroes its table and fills in the entry points the fake implements; the
// loader answers a call whose entry is null with ZE_RESULT_ERROR_UNSUPPORTED_FEATURE.
#include <level_zero/ze_ddi.h>
#include <level_zero/zes_ddi.h>
#include <level_zero/zet_ddi.h>

#include "fake_ze_entries.h"

using namespace xmc_fake_ze;

namespace {

// Any 1.x table version is served; the table is always fully (re)written.
template <class Table>
ze_result_t begin(ze_api_version_t version, Table* table) {
    if (table == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (ZE_MAJOR_VERSION(version) != ZE_MAJOR_VERSION(ZE_API_VERSION_CURRENT))
        return ZE_RESULT_ERROR_UNSUPPORTED_VERSION;
    *table = Table{};
    return ZE_RESULT_SUCCESS;
}

}  // namespace

#define XMC_FAKE_ZE_GETTER(getter, table_t, fill)                                       \
    extern "C" ZE_DLLEXPORT ze_result_t ZE_APICALL getter(ze_api_version_t version,     \
                                                          table_t* t) {                  \
        ze_result_t r = begin(version, t);                                               \
        if (r == ZE_RESULT_SUCCESS) { fill }                                             \
        return r;                                                                        \
    }

// ---------------------------------------------------------------------------------
// Tables with entry points the fake implements.
XMC_FAKE_ZE_GETTER(zeGetGlobalProcAddrTable, ze_global_dditable_t, t->pfnInit = Init;)

XMC_FAKE_ZE_GETTER(zeGetDriverProcAddrTable, ze_driver_dditable_t,
                   t->pfnGet = DriverGet;
                   t->pfnGetApiVersion = DriverGetApiVersion;
                   t->pfnGetProperties = DriverGetProperties;
                   t->pfnGetExtensionProperties = DriverGetExtensionProperties;)

XMC_FAKE_ZE_GETTER(zeGetDeviceProcAddrTable, ze_device_dditable_t,
                   t->pfnGet = DeviceGet;
                   t->pfnGetProperties = DeviceGetProperties;
                   t->pfnGetCommandQueueGroupProperties = DeviceGetCommandQueueGroupProperties;
                   t->pfnGetMemoryProperties = DeviceGetMemoryProperties;)

XMC_FAKE_ZE_GETTER(zeGetContextProcAddrTable, ze_context_dditable_t,
                   t->pfnCreate = ContextCreate;
                   t->pfnDestroy = ContextDestroy;
                   t->pfnCreateEx = ContextCreateEx;)

XMC_FAKE_ZE_GETTER(zeGetCommandQueueProcAddrTable, ze_command_queue_dditable_t,
                   t->pfnCreate = CommandQueueCreate;
                   t->pfnDestroy = CommandQueueDestroy;
                   t->pfnExecuteCommandLists = CommandQueueExecuteCommandLists;
                   t->pfnSynchronize = CommandQueueSynchronize;)

XMC_FAKE_ZE_GETTER(zeGetCommandListProcAddrTable, ze_command_list_dditable_t,
                   t->pfnCreate = CommandListCreate;
                   t->pfnCreateImmediate = CommandListCreateImmediate;
                   t->pfnDestroy = CommandListDestroy;
                   t->pfnClose = CommandListClose;
                   t->pfnReset = CommandListReset;
                   t->pfnAppendBarrier = CommandListAppendBarrier;
                   t->pfnAppendMemoryCopy = CommandListAppendMemoryCopy;
                   t->pfnAppendMemoryCopyRegion = CommandListAppendMemoryCopyRegion;
                   t->pfnAppendSignalEvent = CommandListAppendSignalEvent;
                   t->pfnAppendWaitOnEvents = CommandListAppendWaitOnEvents;)

XMC_FAKE_ZE_GETTER(zeGetEventProcAddrTable, ze_event_dditable_t,
                   t->pfnCreate = EventCreate;
                   t->pfnDestroy = EventDestroy;
                   t->pfnHostSignal = EventHostSignal;
                   t->pfnHostSynchronize = EventHostSynchronize;
                   t->pfnQueryStatus = EventQueryStatus;
                   t->pfnHostReset = EventHostReset;)

XMC_FAKE_ZE_GETTER(zeGetEventPoolProcAddrTable, ze_event_pool_dditable_t,
                   t->pfnCreate = EventPoolCreate;
                   t->pfnDestroy = EventPoolDestroy;)

XMC_FAKE_ZE_GETTER(zeGetMemProcAddrTable, ze_mem_dditable_t,
                   t->pfnAllocDevice = MemAllocDevice;
                   t->pfnAllocHost = MemAllocHost;
                   t->pfnFree = MemFree;
                   t->pfnGetAllocProperties = MemGetAllocProperties;
                   t->pfnGetAddressRange = MemGetAddressRange;)

XMC_FAKE_ZE_GETTER(zeGetVirtualMemProcAddrTable, ze_virtual_mem_dditable_t,
                   t->pfnReserve = VirtualMemReserve;
                   t->pfnFree = VirtualMemFree;
                   t->pfnQueryPageSize = VirtualMemQueryPageSize;
                   t->pfnMap = VirtualMemMap;
                   t->pfnUnmap = VirtualMemUnmap;
                   t->pfnSetAccessAttribute = VirtualMemSetAccessAttribute;
                   t->pfnGetAccessAttribute = VirtualMemGetAccessAttribute;)

XMC_FAKE_ZE_GETTER(zeGetPhysicalMemProcAddrTable, ze_physical_mem_dditable_t,
                   t->pfnCreate = PhysicalMemCreate;
                   t->pfnDestroy = PhysicalMemDestroy;)

XMC_FAKE_ZE_GETTER(zesGetDeviceProcAddrTable, zes_device_dditable_t,
                   t->pfnEnumMemoryModules = SysmanDeviceEnumMemoryModules;)

XMC_FAKE_ZE_GETTER(zesGetMemoryProcAddrTable, zes_memory_dditable_t,
                   t->pfnGetProperties = SysmanMemoryGetProperties;
                   t->pfnGetState = SysmanMemoryGetState;)

// ---------------------------------------------------------------------------------
// Tables the fake leaves empty (every entry null).
XMC_FAKE_ZE_GETTER(zeGetDeviceExpProcAddrTable, ze_device_exp_dditable_t, )
XMC_FAKE_ZE_GETTER(zeGetImageProcAddrTable, ze_image_dditable_t, )
XMC_FAKE_ZE_GETTER(zeGetImageExpProcAddrTable, ze_image_exp_dditable_t, )
XMC_FAKE_ZE_GETTER(zeGetFenceProcAddrTable, ze_fence_dditable_t, )
XMC_FAKE_ZE_GETTER(zeGetEventExpProcAddrTable, ze_event_exp_dditable_t, )
XMC_FAKE_ZE_GETTER(zeGetModuleProcAddrTable, ze_module_dditable_t, )
XMC_FAKE_ZE_GETTER(zeGetModuleBuildLogProcAddrTable, ze_module_build_log_dditable_t, )
XMC_FAKE_ZE_GETTER(zeGetKernelProcAddrTable, ze_kernel_dditable_t, )
XMC_FAKE_ZE_GETTER(zeGetKernelExpProcAddrTable, ze_kernel_exp_dditable_t, )
XMC_FAKE_ZE_GETTER(zeGetSamplerProcAddrTable, ze_sampler_dditable_t, )
XMC_FAKE_ZE_GETTER(zeGetFabricVertexExpProcAddrTable, ze_fabric_vertex_exp_dditable_t, )
XMC_FAKE_ZE_GETTER(zeGetFabricEdgeExpProcAddrTable, ze_fabric_edge_exp_dditable_t, )
XMC_FAKE_ZE_GETTER(zetGetDeviceProcAddrTable, zet_device_dditable_t, )
XMC_FAKE_ZE_GETTER(zetGetContextProcAddrTable, zet_context_dditable_t, )
XMC_FAKE_ZE_GETTER(zetGetCommandListProcAddrTable, zet_command_list_dditable_t, )
XMC_FAKE_ZE_GETTER(zetGetModuleProcAddrTable, zet_module_dditable_t, )
XMC_FAKE_ZE_GETTER(zetGetKernelProcAddrTable, zet_kernel_dditable_t, )
XMC_FAKE_ZE_GETTER(zetGetMetricGroupProcAddrTable, zet_metric_group_dditable_t, )
XMC_FAKE_ZE_GETTER(zetGetMetricGroupExpProcAddrTable, zet_metric_group_exp_dditable_t, )
XMC_FAKE_ZE_GETTER(zetGetMetricProcAddrTable, zet_metric_dditable_t, )
XMC_FAKE_ZE_GETTER(zetGetMetricStreamerProcAddrTable, zet_metric_streamer_dditable_t, )
XMC_FAKE_ZE_GETTER(zetGetMetricQueryPoolProcAddrTable, zet_metric_query_pool_dditable_t, )
XMC_FAKE_ZE_GETTER(zetGetMetricQueryProcAddrTable, zet_metric_query_dditable_t, )
XMC_FAKE_ZE_GETTER(zetGetTracerExpProcAddrTable, zet_tracer_exp_dditable_t, )
XMC_FAKE_ZE_GETTER(zetGetDebugProcAddrTable, zet_debug_dditable_t, )
XMC_FAKE_ZE_GETTER(zesGetDriverProcAddrTable, zes_driver_dditable_t, )
XMC_FAKE_ZE_GETTER(zesGetSchedulerProcAddrTable, zes_scheduler_dditable_t, )
XMC_FAKE_ZE_GETTER(zesGetPerformanceFactorProcAddrTable, zes_performance_factor_dditable_t, )
XMC_FAKE_ZE_GETTER(zesGetPowerProcAddrTable, zes_power_dditable_t, )
XMC_FAKE_ZE_GETTER(zesGetFrequencyProcAddrTable, zes_frequency_dditable_t, )
XMC_FAKE_ZE_GETTER(zesGetEngineProcAddrTable, zes_engine_dditable_t, )
XMC_FAKE_ZE_GETTER(zesGetStandbyProcAddrTable, zes_standby_dditable_t, )
XMC_FAKE_ZE_GETTER(zesGetFirmwareProcAddrTable, zes_firmware_dditable_t, )
XMC_FAKE_ZE_GETTER(zesGetFabricPortProcAddrTable, zes_fabric_port_dditable_t, )
XMC_FAKE_ZE_GETTER(zesGetTemperatureProcAddrTable, zes_temperature_dditable_t, )
XMC_FAKE_ZE_GETTER(zesGetPsuProcAddrTable, zes_psu_dditable_t, )
XMC_FAKE_ZE_GETTER(zesGetFanProcAddrTable, zes_fan_dditable_t, )
XMC_FAKE_ZE_GETTER(zesGetLedProcAddrTable, zes_led_dditable_t, )
XMC_FAKE_ZE_GETTER(zesGetRasProcAddrTable, zes_ras_dditable_t, )
XMC_FAKE_ZE_GETTER(zesGetDiagnosticsProcAddrTable, zes_diagnostics_dditable_t, )
