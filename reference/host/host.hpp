// The host backend's instance and the entry points of each primitive.
#pragma once
#include "errors.hpp"
#include "pin_registry.hpp"

namespace xmc::host {

struct Instance : xmc_instance {};

// Fills the table with every entry point this library implements.
void fill_table(xmc_backend &table);

// pin.cpp
xmc_status pin_alloc(xmc_instance *inst, size_t bytes, size_t alignment, int32_t device,
                     xmc_pin_result *out);
xmc_status pin_free(xmc_instance *inst, void *base);
xmc_status pin_query(xmc_instance *inst, const void *addr, size_t len, xmc_pin_info *out);
xmc_status pin_stats(xmc_instance *inst, xmc_pin_stats *out);
xmc_status pin_ref(xmc_instance *inst, const void *addr);
xmc_status pin_unref(xmc_instance *inst, const void *addr);

} // namespace xmc::host
