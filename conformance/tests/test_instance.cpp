// CORE-INSTANCE: the entry points every backend has (capability `always`):
// open, close, device_count, device_info, status_name and last_error, under
// hostile arguments and dead instances (SPEC 3). Run on every selected
// backend, in the suite HostileTest (hostile.hpp); and, for a backend over a driver, the entry
// points that take a device where the platform is hidden (AbsentPlatform, absent_platform.hpp).
#include "absent_platform.hpp"
#include "hostile.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace xmc::conformance {
namespace {

TEST_P(HostileTest, CORE_INSTANCE_OpenRefusesHostileParameters) {
    xmc_instance *o = nullptr;
    EXPECT_EQ(api->open(nullptr, nullptr), XMC_ERR_INVALID_ARGUMENT) << "open with a NULL result";
    xmc_open_params p{sizeof(xmc_open_params), nullptr};
    EXPECT_EQ(api->open(&p, nullptr), XMC_ERR_INVALID_ARGUMENT) << "open with a NULL result";
    // Every struct_size below ABI version 1's structure: `options` would be read past the caller's structure.
    for (uint32_t size : {0u, 1u, 3u, 4u, uint32_t(offsetof(xmc_open_params, options)),
                          uint32_t(sizeof(xmc_open_params) - 1)}) {
        p = xmc_open_params{size, "no_such_key=1"};
        EXPECT_EQ(api->open(&p, &o), XMC_ERR_INVALID_ARGUMENT) << "struct_size " << size;
        EXPECT_EQ(o, nullptr) << "struct_size " << size;
    }
    for (const char *opts : {"no_such_key=1", "=", "vmm_workers", "vmm_workers=", "vmm_workers=0",
                             "vmm_workers=-1", "vmm_workers=99999999999999999999999", "vmm_workers=1x",
                             "vmm_workers=1;no_such_key=2"}) {
        p = xmc_open_params{sizeof(xmc_open_params), opts};
        EXPECT_EQ(api->open(&p, &o), XMC_ERR_INVALID_ARGUMENT) << "options '" << opts << "'";
        EXPECT_EQ(o, nullptr) << "options '" << opts << "'";
    }
    // NULL params, and a newer caller's larger structure, are accepted.
    XMC_EXPECT_STATUS(XMC_OK, api->open(nullptr, &o));
    if (o) { XMC_EXPECT_STATUS(XMC_OK, api->close(o)); }
    struct Newer { xmc_open_params p; uint64_t future; } newer{{sizeof(Newer), nullptr}, 42};
    o = nullptr;
    XMC_EXPECT_STATUS(XMC_OK, api->open(&newer.p, &o));
    if (o) { XMC_EXPECT_STATUS(XMC_OK, api->close(o)); }
}

TEST_P(HostileTest, CORE_INSTANCE_ClosedOrNullInstanceRefused) {
    if (!in_tree()) XMC_SKIP(SkipKind::Unsupported, "only the in-tree backends define calls on a NULL or closed instance (docs/abi.md)");
    xmc_instance *closed = closed_instance();
    int32_t n = -1;
    xmc_device_info d{};
    for (xmc_instance *i : {static_cast<xmc_instance *>(nullptr), closed}) {
        SCOPED_TRACE(i ? "closed instance" : "NULL instance");
        EXPECT_EQ(api->close(i), XMC_ERR_INVALID_HANDLE);
        EXPECT_EQ(api->device_count(i, &n), XMC_ERR_INVALID_HANDLE);
        EXPECT_EQ(n, -1);
        EXPECT_EQ(api->device_info(i, 0, &d), XMC_ERR_INVALID_HANDLE);
        // last_error of a dead instance: nothing (all zero), never a read of it.
        xmc_error_info e{};
        std::memset(&e, 0x7F, sizeof e);
        api->last_error(i, &e);
        EXPECT_EQ(e.status, XMC_OK);
        EXPECT_EQ(e.call[0], 0);
    }
    api->last_error(inst, nullptr);  // no crash
    // The live instance is untouched by all of this.
    XMC_EXPECT_STATUS(XMC_OK, api->device_count(inst, &n));
}

TEST_P(HostileTest, CORE_INSTANCE_DeviceQueriesRefuseHostileArguments) {
    int32_t n = 0;
    XMC_ASSERT_STATUS(XMC_OK, api->device_count(inst, &n));
    XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->device_count(inst, nullptr), "device_count");
    xmc_device_info d{};
    if (n > 0) { XMC_EXPECT_REFUSED(XMC_ERR_INVALID_ARGUMENT, api->device_info(inst, 0, nullptr), "device_info"); }
    for (int32_t index : {n, -1, INT32_MIN, INT32_MAX}) {
        std::memset(&d, 0x33, sizeof d);
        XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->device_info(inst, index, &d), "device_info") << "index " << index;
    }
    // Values a C caller may pass that name no status (within the enum's value
    // range: a C++ caller cannot portably form others).
    for (int v : {int(XMC_STATUS_COUNT_), 20, 31}) {
        const char *name = api->status_name(static_cast<xmc_status>(v));
        ASSERT_NE(name, nullptr) << "status_name(" << v << ")";
        EXPECT_STREQ(name, "unknown_status") << "status_name(" << v << ")";
    }
}

// Every entry point that takes a device, where the platform is hidden in a child (no driver
// library, a driver with no device, devices without the registration extension). With no device
// at all the platform cannot serve anything: each is refused with exactly XMC_ERR_UNSUPPORTED,
// saying why, and no driver code, since no driver answered (an invented driver error is a
// pretence too). Where devices exist, the device past the last and -1 are XMC_ERR_NO_DEVICE.
// Each refusal names the call and makes nothing.
TEST_P(AbsentPlatform, CORE_INSTANCE_EveryEntryPointTakingADeviceAnswersExactlyWhereThePlatformIsHidden) {
    each_hiding([&](Hiding::What) {
        int32_t n = -1;
        XMC_ASSERT_STATUS(XMC_OK, api->device_count(inst, &n));
        ASSERT_GE(n, 0);
        const xmc_status want = n == 0 ? XMC_ERR_UNSUPPORTED : XMC_ERR_NO_DEVICE;
        auto exact = [&](xmc_status got, const char *call) {
            EXPECT_TRUE(this->refused(want, got, call));
            xmc_error_info e{};
            api->last_error(inst, &e);
            if (n == 0) {
                EXPECT_EQ(e.native_code, 0) << call << ": a driver code where no driver answered: " << e.message;
            }
        };
        std::vector<int32_t> absent = {n, -1};
        if (n == 0) absent = {0, 1, -1};
        for (const int32_t d : absent) {
            SCOPED_TRACE("device " + std::to_string(d) + " of " + std::to_string(n));
            xmc_device_info info{};
            XMC_EXPECT_REFUSED(XMC_ERR_NO_DEVICE, api->device_info(inst, d, &info), "device_info");
            if (api->stream_create) {
                xmc_stream *s = nullptr;
                exact(api->stream_create(inst, d, &s), "stream_create");
                EXPECT_EQ(s, nullptr) << "a stream handle for no device";
            }
            if (api->event_create) {
                xmc_event *e = nullptr;
                exact(api->event_create(inst, d, &e), "event_create");
                EXPECT_EQ(e, nullptr) << "an event handle for no device";
            }
            if (api->dev_alloc) {
                void *p = nullptr;
                exact(api->dev_alloc(inst, d, 4096, &p), "dev_alloc");
                EXPECT_EQ(p, nullptr) << "device memory on no device";
            }
            if (api->slot_create) {
                xmc_slot *slot = nullptr;
                xmc_slot_info si{};
                exact(api->slot_create(inst, d, 2u << 20, &slot, &si), "slot_create");
                EXPECT_EQ(slot, nullptr) << "a slot on no device";
            }
            if (api->device_free_memory) {
                uint64_t free_bytes = 0, total = 0;
                exact(api->device_free_memory(inst, d, &free_bytes, &total), "device_free_memory");
            }
        }
    });
}

} // namespace
} // namespace xmc::conformance
