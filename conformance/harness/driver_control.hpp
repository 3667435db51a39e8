// The fault hook (SPEC 7): for a backend that runs over one of the fakes, the
// fake's control API, found in the driver library the backend itself loaded.
// Requirements that need the driver to misbehave (REG-FAIL, REG-UNREG-FAIL,
// REG-IDENTITY's non-identity mapping, REG-UNAVAILABLE) inject faults through
// it, and every test of those files checks the fake's ledger of live objects
// after closing its instances. A backend without such a driver (the host, a
// real driver) has none: those tests skip with a declared "unsupported:" reason.
#pragma once
#include <xmc/backend.h>

#include <cstdint>
#include <string>
#include <vector>

namespace xmc::conformance {

// One driver call as the fake saw it (fake_cuda_control.h, fake_ze_control.h): the
// entry point, the calling thread, and whether the call ran inside a host function
// (the CUDA fake knows; Level Zero has no host callbacks, so there it is always false).
struct DriverCall {
    std::string entry;
    int64_t tid = 0;
    bool in_host_callback = false;
};

struct DriverControl {
    std::string library;  // the fake the backend loaded
    int (*set_faults)(const char *script) = nullptr;
    size_t (*live_objects)() = nullptr;
    size_t (*reclaimed_objects)() = nullptr;
    size_t (*ledger)(char *buf, size_t n) = nullptr;
    // VMM-DOUBLE: second unmaps of one mapping and second releases of one physical handle the
    // driver saw (nullptr: this fake does not count them).
    size_t (*second_releases)() = nullptr;
    // Fault scripts in this driver's terms, one per scenario the suite injects.
    const char *reject_register = nullptr;        // registration refused (resources exhausted)
    const char *fail_next_unregister = nullptr;   // the next release of a registration fails
    const char *nonidentity_register = nullptr;   // registration mapped at another device address
    const char *unsupported_register = nullptr;   // registration not supported by the device
    const char *delay_next_copy = nullptr;        // the next 1-D host<->device copy runs late (COPY-REUSE)
    // The driver's registration (pinning) call and the name of the code
    // reject_register injects: REG-LARGE and PIN-FAIL-CLEAN build their
    // exhaust: and size_limit: scripts from them.
    const char *register_entry = nullptr;
    const char *reject_register_name = nullptr;
    int64_t reject_register_code = 0;             // the native code the first script injects
    int64_t fail_unregister_code = 0;             // ... and the second

    std::string ledger_text() const;
    // Live objects other than contexts: what a failed or undone call must not
    // leave behind (a backend may keep its devices' contexts while open).
    size_t objects_besides_contexts() const;
    // The UUID of the driver device whose context holds the registration at
    // `base`, read from the fake's own records (never from the backend);
    // false with the reason when the ledger has no such registration.
    bool (*registration_uuid)(const DriverControl &c, const void *base, uint8_t uuid[16], std::string *why) = nullptr;

    // The calling thread of every driver call since reset_calls() (VMM-CALLBACK):
    // false with the reason when the fake kept fewer than were made.
    bool (*calls)(std::vector<DriverCall> *out, std::string *why) = nullptr;
    void (*reset_calls)() = nullptr;
    // Why the fake refused the configuration it was started with ("" when it took it):
    // a child that hides a device or an extension checks the hiding happened as intended.
    std::string (*config_error)() = nullptr;
    // Device memory the backend never saw allocated (a framework's own allocator): `bytes` on
    // device `ordinal` straight from the driver, in its primary context, and its free
    // (AFF-PREPARED-STALE by the driver's buffer ID). nullptr: this driver has no such hook.
    bool (*driver_alloc)(int ordinal, size_t bytes, void **out) = nullptr;
    bool (*driver_free)(void *p) = nullptr;
    // Names the running test in the driver's record of its own answers (the CUDA interposer's
    // XMC_CUDA_INTERPOSE_ANSWERS); nullptr: this driver keeps none.
    void (*mark)(const char *test) = nullptr;
};

// The control of the fake driver under `api`, or nullptr with the reason in
// *why (the reason of an unsupported skip). Call after an instance of
// the backend is open: the backend loads its driver then.
const DriverControl *driver_control(const xmc_backend *api, std::string *why);

} // namespace xmc::conformance
