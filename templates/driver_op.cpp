// TEMPLATE: a driver operation = one step of a platform's ops table (SPEC 2 (0.3)): the code
// above the driver is written once in reference/common/ and calls the step; each platform
// supplies the step and nothing else. Four parts, each copied into the file it names; not built.
//
// The ops tables today (this template shows RegOps; the others follow the same pattern):
//   be::RegOps              reference/common/registration.hpp  registration (REG-*); filled in
//                           reference/{host,cuda,level_zero}/register.cpp, registrations()
//   be::InstanceOps         reference/common/lifecycle.hpp     open and the close order; filled
//                           in reference/{host,cuda,level_zero}/backend.cpp, kInstanceOps
//   PinRegistry::LockSteps  reference/common/pin_registry.hpp  the pin registry's lock only
//   be::VmmOps<Vmm>         reference/common/slots.hpp         slots (VMM-*); filled in
//                           reference/{host,cuda,level_zero}/vmm.cpp, vmm_ops(), by member name
// Pinning's driver part, streams, copies, graphs and the transfer executors have no table yet:
// their driver calls sit in each platform's file of the primitive.

// ---- 1. reference/common/registration.hpp: the step, a member of struct RegOps ------------
// TEMPLATE: RegOps is filled BY POSITION in each platform's registrations() (part 4): put the
// member at the end and name it in all three initializers. One left out is a null pointer, not
// a compile error (the build passes -Wno-missing-field-initializers).
struct RegOps {
    // ... release_call, large, check, context, make, release, native_name, idle, gone, lock, unlock
    // TEMPLATE: what the step does to [addr, +bytes) in ctx, and the requirement that needs it.
    // 0, or the driver's code (named by native_name). `call`: the entry point it runs for.
    int64_t (*NEW_STEP)(const char *call, void *ctx, void *addr, size_t bytes);
};

// ---- 2. reference/common/registration.cpp: the code above the driver, once --------------
// Argument checks, the index under its lock, the refusal with the driver's code: every platform
// alike. (Declared in class Registrations; the entry point: entry_point.md, part 2.)
xmc_status Registrations::NEW_ENTRY(xmc_instance *inst, void *addr, size_t bytes) {
    if (!addr) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "NEW_ENTRY", "NEW_ENTRY: address is NULL");
    Guard lock(*this, "NEW_ENTRY");  // ops.lock .. ops.unlock (REG-THREADS)
    auto it = ranges_.find(reinterpret_cast<uintptr_t>(addr));
    if (it == ranges_.end() || it->second.pinned)
        return fail(inst, XMC_ERR_NOT_REGISTERED, 0, "NEW_ENTRY", "NEW_ENTRY: %p is not a registered base", addr);
    if (const int64_t res = ops.NEW_STEP("NEW_ENTRY", it->second.ctx, addr, bytes); res != 0)
        return fail(inst, XMC_ERR_DRIVER, res, "NEW_ENTRY", "NEW_ENTRY: the driver refused [%p, +%zu): %s (%lld)",
                    addr, bytes, ops.native_name(res), static_cast<long long>(res));
    return XMC_OK;
}

// ---- 3. each platform's step, in the anonymous namespace of its register.cpp ---------------
// reference/host/register.cpp: the kernel is the host's driver; errno is the native code.
int64_t NEW_STEP(const char *, void *, void *addr, size_t bytes) {
    return HOST_SYSTEM_CALL(addr, bytes) == 0 ? 0 : errno;
}
// reference/cuda/register.cpp: in the registration's context, as `release` is.
int64_t NEW_STEP(const char *, void *ctx, void *addr, size_t bytes) {
    Driver &d = Driver::get();
    CtxScope scope(d, static_cast<CUcontext>(ctx));
    CUresult res = scope.result();
    if (res == CUDA_SUCCESS) res = d.cuNEW_DRIVER_CALL(addr, bytes);  // TEMPLATE: listed in XMC_CU_REGISTER(X)
    return res;
}
// reference/level_zero/register.cpp
int64_t NEW_STEP(const char *, void *ctx, void *addr, size_t bytes) {
    Driver &d = Driver::get();  // TEMPLATE: zeNEW_DRIVER_CALL listed in XMC_ZE_REGISTER(X)
    return static_cast<int64_t>(d.zeNEW_DRIVER_CALL(static_cast<ze_context_handle_t>(ctx), addr, bytes));
}

// ---- 4. each platform's table: the step after be::reg_unlock, in all three ------------------
// reference/host/register.cpp (cuda: "cuMemHostUnregister", {XMC_REG_LARGE_SPLIT, kRegChunkBytes};
// level_zero: "zeMemFree", {XMC_REG_LARGE_REFUSE, kRegLimitBytes}; the rest the same)
be::Registrations &registrations() {
    static be::Registrations r(be::RegOps{"munlock", {XMC_REG_LARGE_NO_LIMIT, 0}, check, context, make, release,
                                          native_name, idle, gone, be::reg_lock, be::reg_unlock, NEW_STEP});
    return r;
}

// A broken backend then plants its bug in this step alone (broken_backend.cpp):
//   broken_reg::steps(xmc::host::registrations()).NEW_STEP = buggy_new_step;
