/* Level Zero "external memory mapping" extension (ZE_extension_external_memmap_sysmem).
 *
 * zeMemAllocHost with this descriptor chained on ze_host_mem_alloc_desc_t::pNext maps
 * existing, page-aligned system memory for the devices of the context instead of
 * allocating; the returned pointer normally equals pSystemMemory, and zeMemFree on it
 * releases the mapping without freeing the host pages.
 *
 * The Debian level-zero headers (spec 1.4) predate the extension, so it is declared
 * here, under xmc_ names that cannot clash with a newer ze_api.h. The layout and the
 * numeric values are those of the Level Zero specification. The fake driver includes this
 * copy too (target xmc_ze_external_memmap): one declaration, which the backend and the
 * fake cannot disagree on. */
#ifndef XMC_REFERENCE_LEVEL_ZERO_ZE_EXTERNAL_MEMMAP_H
#define XMC_REFERENCE_LEVEL_ZERO_ZE_EXTERNAL_MEMMAP_H

#include <stdint.h>
#include <level_zero/ze_api.h>

/* Name listed by zeDriverGetExtensionProperties (spelling as in Intel's headers and
 * compute-runtime: ZE_EXTERNAL_MEMORY_MAPPING_EXT_NAME). */
#define XMC_ZE_EXTERNAL_MEMMAP_SYSMEM_EXT_NAME "ZE_extension_external_memmap_sysmem"

/* ZE_EXTERNAL_MEMMAP_SYSMEM_EXT_VERSION_1_0 */
#define XMC_ZE_EXTERNAL_MEMMAP_SYSMEM_EXT_VERSION_1_0 ZE_MAKE_VERSION(1, 0)

/* ZE_STRUCTURE_TYPE_EXTERNAL_MEMMAP_SYSMEM_EXT_DESC */
#define XMC_ZE_STRUCTURE_TYPE_EXTERNAL_MEMMAP_SYSMEM_EXT_DESC ((ze_structure_type_t)0x00020037)

/* ze_external_memmap_sysmem_ext_desc_t */
typedef struct xmc_ze_external_memmap_sysmem_ext_desc_t {
    ze_structure_type_t stype; /* XMC_ZE_STRUCTURE_TYPE_EXTERNAL_MEMMAP_SYSMEM_EXT_DESC */
    const void* pNext;         /* null or a further extension structure */
    void* pSystemMemory;       /* system memory to map; page-aligned */
    uint64_t size;             /* bytes to map; a multiple of the page size */
} xmc_ze_external_memmap_sysmem_ext_desc_t;

#endif /* XMC_REFERENCE_LEVEL_ZERO_ZE_EXTERNAL_MEMMAP_H */
