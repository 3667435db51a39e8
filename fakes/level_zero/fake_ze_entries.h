// The entry points the fake implements, as the loader calls them through the DDI
// tables (fake_ze_ddi.cpp fills the tables). Each is named after its API function
// without the "ze"/"zes" prefix.
#pragma once

#include <level_zero/ze_api.h>
#include <level_zero/zes_api.h>

namespace xmc_fake_ze {

// fake_ze_driver.cpp: driver, devices, contexts, sysman memory state
ze_result_t ZE_APICALL Init(ze_init_flags_t flags);
ze_result_t ZE_APICALL DriverGet(uint32_t* pCount, ze_driver_handle_t* phDrivers);
ze_result_t ZE_APICALL DriverGetApiVersion(ze_driver_handle_t hDriver, ze_api_version_t* version);
ze_result_t ZE_APICALL DriverGetProperties(ze_driver_handle_t hDriver,
                                           ze_driver_properties_t* pDriverProperties);
ze_result_t ZE_APICALL DriverGetExtensionProperties(
    ze_driver_handle_t hDriver, uint32_t* pCount, ze_driver_extension_properties_t* pExtensionProperties);
ze_result_t ZE_APICALL DeviceGet(ze_driver_handle_t hDriver, uint32_t* pCount,
                                 ze_device_handle_t* phDevices);
ze_result_t ZE_APICALL DeviceGetProperties(ze_device_handle_t hDevice,
                                           ze_device_properties_t* pDeviceProperties);
ze_result_t ZE_APICALL DeviceGetMemoryProperties(ze_device_handle_t hDevice, uint32_t* pCount,
                                                 ze_device_memory_properties_t* pMemProperties);
ze_result_t ZE_APICALL DeviceGetCommandQueueGroupProperties(
    ze_device_handle_t hDevice, uint32_t* pCount,
    ze_command_queue_group_properties_t* pCommandQueueGroupProperties);
ze_result_t ZE_APICALL ContextCreate(ze_driver_handle_t hDriver, const ze_context_desc_t* desc,
                                     ze_context_handle_t* phContext);
ze_result_t ZE_APICALL ContextCreateEx(ze_driver_handle_t hDriver, const ze_context_desc_t* desc,
                                       uint32_t numDevices, ze_device_handle_t* phDevices,
                                       ze_context_handle_t* phContext);
ze_result_t ZE_APICALL ContextDestroy(ze_context_handle_t hContext);
ze_result_t ZE_APICALL SysmanDeviceEnumMemoryModules(zes_device_handle_t hDevice, uint32_t* pCount,
                                                     zes_mem_handle_t* phMemory);
ze_result_t ZE_APICALL SysmanMemoryGetProperties(zes_mem_handle_t hMemory,
                                            zes_mem_properties_t* pProperties);
ze_result_t ZE_APICALL SysmanMemoryGetState(zes_mem_handle_t hMemory, zes_mem_state_t* pState);

// fake_ze_memory.cpp: allocations, registrations, virtual memory
ze_result_t ZE_APICALL MemAllocHost(ze_context_handle_t hContext,
                                    const ze_host_mem_alloc_desc_t* host_desc, size_t size,
                                    size_t alignment, void** pptr);
ze_result_t ZE_APICALL MemAllocDevice(ze_context_handle_t hContext,
                                      const ze_device_mem_alloc_desc_t* device_desc, size_t size,
                                      size_t alignment, ze_device_handle_t hDevice, void** pptr);
ze_result_t ZE_APICALL MemFree(ze_context_handle_t hContext, void* ptr);
ze_result_t ZE_APICALL MemGetAllocProperties(ze_context_handle_t hContext, const void* ptr,
                                             ze_memory_allocation_properties_t* pMemAllocProperties,
                                             ze_device_handle_t* phDevice);
ze_result_t ZE_APICALL MemGetAddressRange(ze_context_handle_t hContext, const void* ptr,
                                          void** pBase, size_t* pSize);
ze_result_t ZE_APICALL VirtualMemReserve(ze_context_handle_t hContext, const void* pStart,
                                         size_t size, void** pptr);
ze_result_t ZE_APICALL VirtualMemFree(ze_context_handle_t hContext, const void* ptr, size_t size);
ze_result_t ZE_APICALL VirtualMemQueryPageSize(ze_context_handle_t hContext,
                                               ze_device_handle_t hDevice, size_t size,
                                               size_t* pagesize);
ze_result_t ZE_APICALL PhysicalMemCreate(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                                         ze_physical_mem_desc_t* desc,
                                         ze_physical_mem_handle_t* phPhysicalMemory);
ze_result_t ZE_APICALL PhysicalMemDestroy(ze_context_handle_t hContext,
                                          ze_physical_mem_handle_t hPhysicalMemory);
ze_result_t ZE_APICALL VirtualMemMap(ze_context_handle_t hContext, const void* ptr, size_t size,
                                     ze_physical_mem_handle_t hPhysicalMemory, size_t offset,
                                     ze_memory_access_attribute_t access);
ze_result_t ZE_APICALL VirtualMemUnmap(ze_context_handle_t hContext, const void* ptr, size_t size);
ze_result_t ZE_APICALL VirtualMemSetAccessAttribute(ze_context_handle_t hContext, const void* ptr,
                                                    size_t size, ze_memory_access_attribute_t access);
ze_result_t ZE_APICALL VirtualMemGetAccessAttribute(ze_context_handle_t hContext, const void* ptr,
                                                    size_t size, ze_memory_access_attribute_t* access,
                                                    size_t* outSize);

// fake_ze_commands.cpp: queues, command lists, copies, events
ze_result_t ZE_APICALL CommandQueueCreate(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                                          const ze_command_queue_desc_t* desc,
                                          ze_command_queue_handle_t* phCommandQueue);
ze_result_t ZE_APICALL CommandQueueDestroy(ze_command_queue_handle_t hCommandQueue);
ze_result_t ZE_APICALL CommandQueueExecuteCommandLists(ze_command_queue_handle_t hCommandQueue,
                                                       uint32_t numCommandLists,
                                                       ze_command_list_handle_t* phCommandLists,
                                                       ze_fence_handle_t hFence);
ze_result_t ZE_APICALL CommandQueueSynchronize(ze_command_queue_handle_t hCommandQueue,
                                               uint64_t timeout);
ze_result_t ZE_APICALL CommandListCreate(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                                         const ze_command_list_desc_t* desc,
                                         ze_command_list_handle_t* phCommandList);
ze_result_t ZE_APICALL CommandListCreateImmediate(ze_context_handle_t hContext,
                                                  ze_device_handle_t hDevice,
                                                  const ze_command_queue_desc_t* altdesc,
                                                  ze_command_list_handle_t* phCommandList);
ze_result_t ZE_APICALL CommandListDestroy(ze_command_list_handle_t hCommandList);
ze_result_t ZE_APICALL CommandListClose(ze_command_list_handle_t hCommandList);
ze_result_t ZE_APICALL CommandListReset(ze_command_list_handle_t hCommandList);
ze_result_t ZE_APICALL CommandListAppendMemoryCopy(ze_command_list_handle_t hCommandList,
                                                   void* dstptr, const void* srcptr, size_t size,
                                                   ze_event_handle_t hSignalEvent,
                                                   uint32_t numWaitEvents,
                                                   ze_event_handle_t* phWaitEvents);
ze_result_t ZE_APICALL CommandListAppendMemoryCopyRegion(
    ze_command_list_handle_t hCommandList, void* dstptr, const ze_copy_region_t* dstRegion,
    uint32_t dstPitch, uint32_t dstSlicePitch, const void* srcptr,
    const ze_copy_region_t* srcRegion, uint32_t srcPitch, uint32_t srcSlicePitch,
    ze_event_handle_t hSignalEvent, uint32_t numWaitEvents, ze_event_handle_t* phWaitEvents);
ze_result_t ZE_APICALL CommandListAppendBarrier(ze_command_list_handle_t hCommandList,
                                                ze_event_handle_t hSignalEvent,
                                                uint32_t numWaitEvents,
                                                ze_event_handle_t* phWaitEvents);
ze_result_t ZE_APICALL CommandListAppendSignalEvent(ze_command_list_handle_t hCommandList,
                                                    ze_event_handle_t hEvent);
ze_result_t ZE_APICALL CommandListAppendWaitOnEvents(ze_command_list_handle_t hCommandList,
                                                     uint32_t numEvents, ze_event_handle_t* phEvents);
ze_result_t ZE_APICALL EventPoolCreate(ze_context_handle_t hContext, const ze_event_pool_desc_t* desc,
                                       uint32_t numDevices, ze_device_handle_t* phDevices,
                                       ze_event_pool_handle_t* phEventPool);
ze_result_t ZE_APICALL EventPoolDestroy(ze_event_pool_handle_t hEventPool);
ze_result_t ZE_APICALL EventCreate(ze_event_pool_handle_t hEventPool, const ze_event_desc_t* desc,
                                   ze_event_handle_t* phEvent);
ze_result_t ZE_APICALL EventDestroy(ze_event_handle_t hEvent);
ze_result_t ZE_APICALL EventHostSignal(ze_event_handle_t hEvent);
ze_result_t ZE_APICALL EventHostSynchronize(ze_event_handle_t hEvent, uint64_t timeout);
ze_result_t ZE_APICALL EventQueryStatus(ze_event_handle_t hEvent);
ze_result_t ZE_APICALL EventHostReset(ze_event_handle_t hEvent);

}  // namespace xmc_fake_ze
