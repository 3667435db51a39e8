// Per-thread, per-instance error detail shared by the in-tree backends.
// Every failing entry point calls fail(): it returns the status, so a call
// site reads `return fail(inst, XMC_ERR_..., native, "pin_free", "...")`.
#pragma once
#include <xmc/backend.h>

#include <cstdint>

// The instance every in-tree backend derives from: an id keys the error slots.
struct xmc_instance {
    xmc_instance();
    virtual ~xmc_instance();
    const uint64_t id;
};

namespace xmc::be {

xmc_status fail(xmc_instance *inst, xmc_status status, int64_t native_code, const char *call,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
// Success of a call: the last error is about the last failing call only, so
// nothing to do; kept as a name for readability at call sites.
inline xmc_status ok() { return XMC_OK; }
void last_error(xmc_instance *inst, xmc_error_info *out);
const char *status_name(xmc_status s);

} // namespace xmc::be
