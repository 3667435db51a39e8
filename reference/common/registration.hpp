// Registration (capability `register`, REG-*), written once for every platform: the argument
// checks, the alignment and large-range policies, the process-wide index of registered ranges,
// chunking, undo, unregister, the last close's release and the query. A platform supplies only
// RegOps, the driver steps below (mlock on the host, cuMemHostRegister in a device's primary
// context on CUDA, zeMemAllocHost with the external-memmap descriptor on Level Zero).
//
// A broken backend of the self-test replaces one step of a platform's RegOps
// (conformance/broken/register/): the bug sits in that step and nowhere else, so the rest stays
// the reference's and cannot drift from it.
#pragma once
#include "errors.hpp"

#include <xmc/backend.h>

#include <cstdint>
#include <map>
#include <mutex>

namespace xmc::be {

// The driver steps of registration. `ctx` is the platform's context (CUcontext,
// ze_context_handle_t; nullptr on the host); native codes are the driver's (errno on the host).
struct RegOps {
    const char *release_call;  // the driver call that releases a range, named in messages
    // REG-LARGE: NO_LIMIT, SPLIT (`limit`: the chunk) or REFUSE (`limit`: the largest size accepted).
    xmc_reg_large_info large;
    // REG-UNAVAILABLE, REG-DEVICE: the driver, the device and flags (XMC_REG_PORTABLE) the platform
    // cannot serve, refused and recorded as `reg_register`'s failure; XMC_OK to go on.
    xmc_status (*check)(xmc_instance *inst, int32_t device, uint32_t flags);
    // REG-DEVICE, REG-UUID: the context a registration for `device` is made and released in.
    xmc_status (*context)(xmc_instance *inst, const char *call, int32_t device, void **ctx);
    // REG-FAIL, REG-IDENTITY: registers one chunk [addr, +bytes) in ctx; the driver must map it at
    // the host address, else it is undone. A refusal is recorded as `call`'s failure with the
    // driver's code in *native; nothing stays registered.
    xmc_status (*make)(xmc_instance *inst, const char *call, void *ctx, void *addr, size_t bytes, int32_t device,
                       uint32_t flags, int64_t *native);
    // Releases chunk [chunk, +bytes) of the registration at `base`, in its context: 0, or the
    // driver's code (still registered). `call`: reg_unregister, close, reg_register (the undo of
    // a refused chunk's predecessors) or pin_free (a pinned block's registration).
    int64_t (*release)(const char *call, void *ctx, void *base, void *chunk, size_t bytes);
    const char *(*native_name)(int64_t native);
    // After the last release of a registration: the platform may let go of what nothing holds.
    void (*idle)();
    // The last close: a release failing with `native` means the range is gone (host: munlock of
    // an unmapped range), so the entry is dropped rather than kept for a retry that cannot work.
    bool (*gone)(int64_t native);
    // REG-THREADS: the index's lock around each entry point `call` (a plain mutex on every
    // platform; a racy broken backend leaves it out of one).
    void (*lock)(std::mutex &mu, const char *call);
    void (*unlock)(std::mutex &mu, const char *call);
};

// The index's lock, taken and given back as RegOps says.
inline void reg_lock(std::mutex &mu, const char *) { mu.lock(); }
inline void reg_unlock(std::mutex &mu, const char *) { mu.unlock(); }

struct RegEntry {
    size_t size = 0;
    int32_t device = 0;
    void *ctx = nullptr;  // where it was made, and where it is released (REG-SAME-CONTEXT)
    bool pinned = false;  // a pinned block's registration (Level Zero): pin_free releases it
};

class Registrations {
public:
    explicit Registrations(const RegOps &ops) : ops(ops) {}

    // The platform's steps; a broken backend replaces one before the first call.
    RegOps ops;
    // REG-THREADS: every check and change of the index happens under it, across the driver calls,
    // so two overlapping registrations can never both pass the check.
    std::mutex mu;

    xmc_status reg_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                            xmc_reg_info *out);
    xmc_status reg_unregister(xmc_instance *inst, void *base);
    xmc_status reg_query(xmc_instance *inst, const void *addr, xmc_reg_info *out);
    xmc_status reg_large_policy(xmc_instance *inst, xmc_reg_large_info *out);
    // REG-CLOSE: the last instance's close releases every registration still held (a pinned
    // block's goes with its block), counted in *released; the first refusal stops it, reported
    // as `close`'s, and keeps the rest.
    xmc_status release_all(xmc_instance *inst, uint64_t *released);

    // A pinned block's registration with `device` (Level Zero keeps it in this index so that a
    // range overlapping it is refused, REG-DOUBLE); invisible to reg_query and reg_unregister.
    xmc_status add_pinned(xmc_instance *inst, uintptr_t base, size_t size, int32_t device, int64_t *native);
    // Releases it (the pin registry's release hook); 0 or the driver's code (then kept).
    int64_t release_pinned(uintptr_t base);

private:
    std::map<uintptr_t, RegEntry> ranges_;  // by base
    std::map<uintptr_t, RegEntry>::iterator containing(uintptr_t addr);
    bool overlaps(uintptr_t addr, size_t bytes);
    size_t chunk_bytes(size_t bytes) const;
    // Releases the chunks of [a, end) from a, in order; *kept: the first chunk still registered.
    int64_t release_chunks(const char *call, void *ctx, uintptr_t a, uintptr_t end, uintptr_t *kept);
    // Releases entry `it` whole; on a refusal the entry stays from the refused chunk on.
    int64_t release_entry(const char *call, std::map<uintptr_t, RegEntry>::iterator it, uintptr_t *kept);
    struct Guard {  // ops.lock .. ops.unlock over one entry point
        Registrations &r;
        const char *call;
        Guard(Registrations &r, const char *call) : r(r), call(call) { r.ops.lock(r.mu, call); }
        ~Guard() { r.ops.unlock(r.mu, call); }
    };
};

} // namespace xmc::be

// The REGISTER group's entry points of a platform, over its Registrations (`regs()`).
#define XMC_REGISTRATION_ENTRIES(regs)                                                                     \
    xmc_reg_align_policy reg_align_policy(xmc_instance *) { return XMC_REG_ALIGN_REFUSE; }                 \
    xmc_status reg_large_policy(xmc_instance *inst, xmc_reg_large_info *out) {                             \
        return regs().reg_large_policy(inst, out);                                                         \
    }                                                                                                      \
    xmc_status reg_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,  \
                            xmc_reg_info *out) {                                                           \
        return regs().reg_register(inst, addr, bytes, device, flags, out);                                 \
    }                                                                                                      \
    xmc_status reg_unregister(xmc_instance *inst, void *base) { return regs().reg_unregister(inst, base); } \
    xmc_status reg_query(xmc_instance *inst, const void *addr, xmc_reg_info *out) {                        \
        return regs().reg_query(inst, addr, out);                                                          \
    }
