// Per-thread, per-instance error detail shared by the in-tree backends.
// Every failing entry point calls fail(): it returns the status, so a call
// site reads `return fail(inst, XMC_ERR_..., native, "pin_free", "...")`.
#pragma once
#include <xmc/backend.h>

#include <cstdint>
#include <string>

// The instance every in-tree backend derives from: an id keys the error slots.
// Constructing one enters it in its library's set of live instances and
// destroying it removes it (instance_live below).
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

// REG-UNAVAILABLE and the like: a driver that is not usable (`why`), or that lacks entry points
// (`missing`, exported by `library`, which is a `kind`: driver, loader), refuses `call` as
// unsupported, naming what is missing; no native code, since no driver answered.
xmc_status require_driver(xmc_instance *inst, const char *call, bool usable, const std::string &why,
                          const char *kind, const std::string &library, const std::string &missing);
// CORE-INSTANCE: an index outside [0, count), negative ones too, is no device.
xmc_status check_device_index(xmc_instance *inst, int32_t device, size_t count, const char *call);
// Copies this thread's last error on `inst`; all zero (XMC_OK) for an
// instance that is not live.
void last_error(xmc_instance *inst, xmc_error_info *out);
const char *status_name(xmc_status s);

// CORE-INSTANCE: NULL, closed and foreign instances are told apart here.
// True when `inst` is an instance of this library that open() made and close()
// has not destroyed. The pointer is only compared, never dereferenced, so a
// NULL, foreign or dangling one is safe to ask about. (A closed instance's
// address can be reused by a later open; it then names that new instance.)
bool instance_live(const xmc_instance *inst);

// Wraps every entry point of a filled table that takes an instance and returns
// a status (kind I in <xmc/backend.h>) so that a NULL, closed or foreign
// instance is refused with XMC_ERR_INVALID_HANDLE before the backend's function
// runs (there is then no live instance to record the detail on). Called once
// per library, by its xmc_backend_entry. The entries of kind P (open,
// last_error, which checks itself, status_name, reg_align_policy) are left as
// they are.
void guard_table(xmc_backend &table);

} // namespace xmc::be
