// Tests of the fake Level Zero driver, run through the REAL loader: the test links
// libze_loader, and ctest sets ZE_ENABLE_ALT_DRIVERS to the fake (once without and
// once with the loader's validation layer). The fake's control API is reached by
// dlopen()ing that same path with RTLD_NOLOAD, which also proves that the loader
// loaded it.
//
// Tests that need another device configuration re-run this binary in a child process
// (`--xmc-child=...`) with different XMC_FAKE_ZE_* variables, because the loader reads
// the driver's devices once per process.
#include <gtest/gtest.h>

#include <level_zero/ze_api.h>
#include <level_zero/zes_api.h>

#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "external_memmap.h"
#include "fake_ze_control.h"

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kVmPage = size_t(2) << 20;
// zeVirtualMemReserve's start hint: the validation layer refuses a null one.
void* const kHint = reinterpret_cast<void*>(kVmPage);

// ---------------------------------------------------------------------------------
// Process-wide state set up in main() before the tests run.
struct Control {
    decltype(&xmc_fake_ze_set_faults) set_faults = nullptr;
    decltype(&xmc_fake_ze_fault_error) fault_error = nullptr;
    decltype(&xmc_fake_ze_live_objects) live_objects = nullptr;
    decltype(&xmc_fake_ze_ledger) ledger = nullptr;
    decltype(&xmc_fake_ze_reset) reset = nullptr;
    decltype(&xmc_fake_ze_call_count) call_count = nullptr;
    decltype(&xmc_fake_ze_device_faults) device_faults = nullptr;
    decltype(&xmc_fake_ze_device_free_memory) device_free_memory = nullptr;
    decltype(&xmc_fake_ze_call_records) call_records = nullptr;
    decltype(&xmc_fake_ze_reset_call_records) reset_call_records = nullptr;
    decltype(&xmc_fake_ze_config_error) config_error = nullptr;
};
Control ctl;
bool g_ctl_ok = false;
ze_result_t g_init = ZE_RESULT_ERROR_UNINITIALIZED;
uint64_t g_init_calls = 0;  // calls of the driver's zeInit, right after zeInit
ze_driver_handle_t g_driver = nullptr;
std::vector<ze_device_handle_t> g_devices;
std::string g_self;  // this executable

std::string ledger_text() {
    if (!g_ctl_ok) return "(no control API)";
    std::string s(ctl.ledger(nullptr, 0) + 1, '\0');
    ctl.ledger(s.data(), s.size());
    s.resize(s.size() - 1);
    return s;
}

bool validation_requested() {
    const char* v = std::getenv("ZE_ENABLE_VALIDATION_LAYER");
    return v != nullptr && std::string(v) == "1";
}

// Loads the control API from the already loaded fake.
void load_control() {
    const char* path = std::getenv("ZE_ENABLE_ALT_DRIVERS");
    if (path == nullptr) return;
    void* h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (h == nullptr) return;
    auto get = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
        return fn != nullptr;
    };
    g_ctl_ok = get(ctl.set_faults, "xmc_fake_ze_set_faults") && get(ctl.fault_error, "xmc_fake_ze_fault_error") &&
               get(ctl.live_objects, "xmc_fake_ze_live_objects") && get(ctl.ledger, "xmc_fake_ze_ledger") &&
               get(ctl.reset, "xmc_fake_ze_reset") && get(ctl.call_count, "xmc_fake_ze_call_count") &&
               get(ctl.device_faults, "xmc_fake_ze_device_faults") &&
               get(ctl.device_free_memory, "xmc_fake_ze_device_free_memory") &&
               get(ctl.call_records, "xmc_fake_ze_call_records") &&
               get(ctl.reset_call_records, "xmc_fake_ze_reset_call_records") &&
               get(ctl.config_error, "xmc_fake_ze_config_error");
}

void init_process() {
    g_init = zeInit(ZE_INIT_FLAG_GPU_ONLY);
    load_control();
    if (g_ctl_ok) g_init_calls = ctl.call_count("zeInit");
    if (g_init != ZE_RESULT_SUCCESS) return;
    uint32_t n = 0;
    if (zeDriverGet(&n, nullptr) != ZE_RESULT_SUCCESS || n != 1) return;
    zeDriverGet(&n, &g_driver);
    uint32_t nd = 0;
    zeDeviceGet(g_driver, &nd, nullptr);
    g_devices.resize(nd);
    zeDeviceGet(g_driver, &nd, g_devices.data());
}

// Runs this binary as a child with extra environment; returns its stdout+stderr.
std::string run_child(const std::string& env, const std::string& mode) {
    std::string cmd = env + " '" + g_self + "' --xmc-child=" + mode + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return "popen failed";
    std::string out;
    char buf[256];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    pclose(p);
    return out;
}

// ---------------------------------------------------------------------------------
// Small helpers around the API.
ze_device_properties_t props_of(ze_device_handle_t d) {
    ze_device_properties_t p{};
    p.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
    EXPECT_EQ(zeDeviceGetProperties(d, &p), ZE_RESULT_SUCCESS);
    return p;
}

ze_context_handle_t context_for(std::vector<ze_device_handle_t> devices) {
    ze_context_desc_t desc{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
    ze_context_handle_t c = nullptr;
    EXPECT_EQ(zeContextCreateEx(g_driver, &desc, static_cast<uint32_t>(devices.size()), devices.data(), &c),
              ZE_RESULT_SUCCESS);
    return c;
}

ze_context_handle_t context_all() {
    ze_context_desc_t desc{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
    ze_context_handle_t c = nullptr;
    EXPECT_EQ(zeContextCreate(g_driver, &desc, &c), ZE_RESULT_SUCCESS);
    return c;
}

ze_command_list_handle_t immediate_list(ze_context_handle_t c, ze_device_handle_t d) {
    ze_command_queue_desc_t q{ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, 0, 0, 0,
                              ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS, ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
    ze_command_list_handle_t l = nullptr;
    EXPECT_EQ(zeCommandListCreateImmediate(c, d, &q, &l), ZE_RESULT_SUCCESS);
    return l;
}

void* device_alloc(ze_context_handle_t c, ze_device_handle_t d, size_t n) {
    ze_device_mem_alloc_desc_t desc{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
    void* p = nullptr;
    EXPECT_EQ(zeMemAllocDevice(c, &desc, n, 64, d, &p), ZE_RESULT_SUCCESS);
    return p;
}

// zeMemAllocHost with the external-memmap descriptor.
ze_result_t register_host(ze_context_handle_t c, void* mem, size_t n, void** out) {
    xmc_ze_external_memmap_sysmem_ext_desc_t ext{XMC_ZE_STRUCTURE_TYPE_EXTERNAL_MEMMAP_SYSMEM_EXT_DESC, nullptr, mem,
                                                 n};
    ze_host_mem_alloc_desc_t desc{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, &ext, 0};
    return zeMemAllocHost(c, &desc, n, kPage, out);
}

// An event pool with `n` events, destroyed with the object.
struct Events {
    ze_event_pool_handle_t pool = nullptr;
    std::vector<ze_event_handle_t> ev;
    Events(ze_context_handle_t c, uint32_t n) {
        ze_event_pool_desc_t pd{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr, ZE_EVENT_POOL_FLAG_HOST_VISIBLE, n};
        EXPECT_EQ(zeEventPoolCreate(c, &pd, 0, nullptr, &pool), ZE_RESULT_SUCCESS);
        for (uint32_t i = 0; i < n; ++i) {
            ze_event_desc_t ed{ZE_STRUCTURE_TYPE_EVENT_DESC, nullptr, i, ZE_EVENT_SCOPE_FLAG_HOST,
                               ZE_EVENT_SCOPE_FLAG_HOST};
            ze_event_handle_t e = nullptr;
            EXPECT_EQ(zeEventCreate(pool, &ed, &e), ZE_RESULT_SUCCESS);
            ev.push_back(e);
        }
    }
    ~Events() { release(); }
    // Destroys the events and the pool now (before their context goes).
    void release() {
        for (auto e : ev) EXPECT_EQ(zeEventDestroy(e), ZE_RESULT_SUCCESS);
        ev.clear();
        if (pool != nullptr) {
            EXPECT_EQ(zeEventPoolDestroy(pool), ZE_RESULT_SUCCESS);
        }
        pool = nullptr;
    }
    ze_event_handle_t operator[](size_t i) const { return ev[i]; }
};

// Appends a copy that signals an event, and waits for it. Returns the append result.
ze_result_t copy_and_wait(ze_context_handle_t c, ze_command_list_handle_t l, void* dst, const void* src, size_t n) {
    Events e(c, 1);
    ze_result_t r = zeCommandListAppendMemoryCopy(l, dst, src, n, e[0], 0, nullptr);
    if (r == ZE_RESULT_SUCCESS) {
        EXPECT_EQ(zeEventHostSynchronize(e[0], UINT64_MAX), ZE_RESULT_SUCCESS);
    }
    return r;
}

// Page-aligned host memory from mmap.
struct Pages {
    uint8_t* p = nullptr;
    size_t n = 0;
    explicit Pages(size_t bytes, uint8_t fill = 0) : n(bytes) {
        void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        p = m == MAP_FAILED ? nullptr : static_cast<uint8_t*>(m);
        if (p != nullptr) std::memset(p, fill, bytes);
    }
    ~Pages() {
        if (p != nullptr) munmap(p, n);
    }
};

void fill_pattern(uint8_t* p, size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(rng());
}

// ---------------------------------------------------------------------------------
class FakeZe : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(g_ctl_ok) << "the fake named by ZE_ENABLE_ALT_DRIVERS was not loaded by the loader, or lacks "
                                 "the control API";
        ASSERT_EQ(g_init, ZE_RESULT_SUCCESS) << "zeInit through the loader";
        ASSERT_NE(g_driver, nullptr);
        ASSERT_EQ(g_devices.size(), 2u);
        ctl.reset();
    }
    void TearDown() override {
        EXPECT_EQ(ctl.live_objects(), 0u) << ledger_text();
        EXPECT_EQ(ctl.device_faults(), expected_device_faults) << ledger_text();
        ctl.reset();
    }
    uint64_t expected_device_faults = 0;
};

// ---------------------------------------------------------------------------------
// Loader facts.
TEST_F(FakeZe, LoaderLoadsTheFakeAndCallsItsInitTwice) {
    EXPECT_EQ(g_init_calls, 2u) << "the loader calls the driver's init once to check it, once for zeInit";
    uint32_t n = 0;
    EXPECT_EQ(zeDriverGet(&n, nullptr), ZE_RESULT_SUCCESS);
    EXPECT_EQ(n, 1u);
    ze_api_version_t v{};
    EXPECT_EQ(zeDriverGetApiVersion(g_driver, &v), ZE_RESULT_SUCCESS);
    EXPECT_EQ(ZE_MAJOR_VERSION(v), 1u);
    ze_driver_properties_t dp{};
    dp.stype = ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES;
    EXPECT_EQ(zeDriverGetProperties(g_driver, &dp), ZE_RESULT_SUCCESS);
    EXPECT_NE(dp.driverVersion, 0u);
    void* layer = dlopen("libze_validation_layer.so.1", RTLD_NOW | RTLD_NOLOAD);
    EXPECT_EQ(layer != nullptr, validation_requested()) << "validation layer loaded iff requested";
    if (layer != nullptr) dlclose(layer);
}

// The loader answers a call whose table entry the driver left null with
// ZE_RESULT_ERROR_UNSUPPORTED_FEATURE when it passes a single driver's table through
// (the default here), but with ZE_RESULT_ERROR_UNINITIALIZED when it intercepts
// (ZE_ENABLE_LOADER_INTERCEPT=1, or several drivers).
TEST_F(FakeZe, UnmodelledCallsAreUnsupportedFeature) {
    const char* intercept = std::getenv("ZE_ENABLE_LOADER_INTERCEPT");
    const ze_result_t unsupported = intercept != nullptr && std::string(intercept) == "1"
                                        ? ZE_RESULT_ERROR_UNINITIALIZED
                                        : ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
    ze_context_handle_t c = context_all();
    ze_device_mem_alloc_desc_t dd{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
    ze_host_mem_alloc_desc_t hd{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
    void* p = nullptr;
    EXPECT_EQ(zeMemAllocShared(c, &dd, &hd, 4096, 0, g_devices[0], &p), unsupported);
    uint32_t n = 0;
    EXPECT_EQ(zeDeviceGetSubDevices(g_devices[0], &n, nullptr), unsupported);
    ze_command_list_handle_t l = immediate_list(c, g_devices[0]);
    uint8_t buf[64], pattern = 7;
    EXPECT_EQ(zeCommandListAppendMemoryFill(l, buf, &pattern, 1, sizeof buf, nullptr, 0, nullptr),
              unsupported);
    EXPECT_EQ(ctl.call_count("zeMemAllocShared"), 0u);
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

// ---------------------------------------------------------------------------------
// Devices.
TEST_F(FakeZe, DevicesHaveDistinctUuidsNamesAndOneCopyGroup) {
    ze_device_properties_t a = props_of(g_devices[0]), b = props_of(g_devices[1]);
    EXPECT_NE(std::memcmp(a.uuid.id, b.uuid.id, ZE_MAX_DEVICE_UUID_SIZE), 0);
    EXPECT_EQ(a.type, ZE_DEVICE_TYPE_GPU);
    EXPECT_STREQ(a.name, "xmc fake Level Zero device 0");
    EXPECT_STREQ(b.name, "xmc fake Level Zero device 1");
    EXPECT_EQ(a.uuid.id[15], 0);
    EXPECT_EQ(b.uuid.id[15], 1);
    for (auto d : g_devices) {
        uint32_t n = 0;
        ASSERT_EQ(zeDeviceGetCommandQueueGroupProperties(d, &n, nullptr), ZE_RESULT_SUCCESS);
        ASSERT_EQ(n, 1u);
        ze_command_queue_group_properties_t g{};
        g.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES;
        ASSERT_EQ(zeDeviceGetCommandQueueGroupProperties(d, &n, &g), ZE_RESULT_SUCCESS);
        EXPECT_TRUE(g.flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY);
        EXPECT_TRUE(g.flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE);
        ze_device_memory_properties_t m{};
        m.stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES;
        n = 1;
        ASSERT_EQ(zeDeviceGetMemoryProperties(d, &n, &m), ZE_RESULT_SUCCESS);
        EXPECT_EQ(m.totalSize, uint64_t(8) << 30);
    }
}

TEST_F(FakeZe, OrderPermutationMovesDevicesWithTheirUuids) {
    EXPECT_EQ(run_child("XMC_FAKE_ZE_DEVICES=3", "order"), "0,1,2\n");
    EXPECT_EQ(run_child("XMC_FAKE_ZE_DEVICES=3 XMC_FAKE_ZE_ORDER=2,0,1", "order"), "2,0,1\n");
    EXPECT_EQ(run_child("XMC_FAKE_ZE_ORDER=1,0", "order"), "1,0\n");
}

// A driver that loads and lists no device (the absent-platform child "no device").
TEST_F(FakeZe, ZeroDevicesInitialiseAndListNone) {
    EXPECT_EQ(run_child("XMC_FAKE_ZE_DEVICES=0", "order"), "\n");
    EXPECT_NE(run_child("XMC_FAKE_ZE_DEVICES=17", "init").find("XMC_FAKE_ZE_DEVICES must be 0..16"), std::string::npos);
}

// Every call is recorded with its thread (VMM-CALLBACK is checked from the record); a
// configuration the fake took leaves no configuration error.
TEST_F(FakeZe, EveryCallIsRecordedWithItsThread) {
    ASSERT_TRUE(g_ctl_ok);
    EXPECT_STREQ(ctl.config_error(), "");
    ctl.reset_call_records();
    uint32_t n = 0;
    ASSERT_EQ(zeDeviceGet(g_driver, &n, nullptr), ZE_RESULT_SUCCESS);
    int64_t other = 0;
    std::thread([&] {
        uint32_t m = 0;
        zeDeviceGet(g_driver, &m, nullptr);
        other = static_cast<int64_t>(gettid());
    }).join();
    std::vector<xmc_fake_ze_call_record> recs(64);
    const size_t seen = ctl.call_records(recs.data(), recs.size());
    ASSERT_GE(seen, 2u);  // a loader layer may make calls of its own
    ASSERT_LE(seen, recs.size());
    std::vector<int64_t> callers;
    for (size_t i = 0; i < seen; ++i)
        if (std::string(recs[i].entry) == "zeDeviceGet") callers.push_back(recs[i].tid);
    EXPECT_EQ(callers, (std::vector<int64_t>{static_cast<int64_t>(gettid()), other}));
    EXPECT_NE(other, static_cast<int64_t>(gettid()));
}

TEST_F(FakeZe, MalformedEnvironmentFailsInitWithAMessage) {
    std::string out = run_child("XMC_FAKE_ZE_ORDER=0,0", "init");
    // With a single driver the loader returns that driver's init result.
    EXPECT_NE(out.find("XMC_FAKE_ZE_ORDER"), std::string::npos) << out;
    EXPECT_NE(out.find("zeInit=0x78000004"), std::string::npos) << out;
    out = run_child("XMC_FAKE_ZE_FAULTS='fail:zeMemFree:ZE_RESULT_ERROR_BOGUS@1'", "init");
    EXPECT_NE(out.find("XMC_FAKE_ZE_FAULTS"), std::string::npos) << out;
    EXPECT_NE(out.find("zeInit=0x78000004"), std::string::npos) << out;
    // The old form is refused at init too, naming the new one.
    out = run_child("XMC_FAKE_ZE_FAULTS='zeMemFree:2:ZE_RESULT_ERROR_DEVICE_LOST'", "init");
    EXPECT_NE(out.find("write 'fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@2'"), std::string::npos) << out;
    EXPECT_NE(out.find("zeInit=0x78000004"), std::string::npos) << out;
    out = run_child("XMC_FAKE_ZE_FAULTS='fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@2'", "init");
    EXPECT_EQ(out, "zeInit=0x0\n");
}

TEST_F(FakeZe, ExternalMemmapExtensionIsListed) {
    uint32_t n = 0;
    ASSERT_EQ(zeDriverGetExtensionProperties(g_driver, &n, nullptr), ZE_RESULT_SUCCESS);
    std::vector<ze_driver_extension_properties_t> ext(n);
    ASSERT_EQ(zeDriverGetExtensionProperties(g_driver, &n, ext.data()), ZE_RESULT_SUCCESS);
    bool found = false;
    for (const auto& e : ext)
        found = found || (std::string(e.name) == "ZE_extension_external_memmap_sysmem" &&
                          e.version == ZE_MAKE_VERSION(1, 0));
    EXPECT_TRUE(found);
}

// ---------------------------------------------------------------------------------
// Registration.
TEST_F(FakeZe, RegistrationInAOneDeviceContextIsIdentityAndUsableOnThatDevice) {
    for (ze_device_handle_t d : g_devices) {
        ze_context_handle_t c = context_for({d});
        Pages host(4 * kPage), back(4 * kPage);
        fill_pattern(host.p, host.n, 1);
        void* mapped = nullptr;
        ASSERT_EQ(register_host(c, host.p, host.n, &mapped), ZE_RESULT_SUCCESS);
        EXPECT_EQ(mapped, host.p) << "identity mapping";
        ze_memory_allocation_properties_t mp{};
        mp.stype = ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES;
        EXPECT_EQ(zeMemGetAllocProperties(c, host.p + 100, &mp, nullptr), ZE_RESULT_SUCCESS);
        EXPECT_EQ(mp.type, ZE_MEMORY_TYPE_HOST);
        void* base = nullptr;
        size_t size = 0;
        EXPECT_EQ(zeMemGetAddressRange(c, host.p + 100, &base, &size), ZE_RESULT_SUCCESS);
        EXPECT_EQ(base, host.p);
        EXPECT_EQ(size, host.n);

        ze_command_list_handle_t l = immediate_list(c, d);
        void* dev = device_alloc(c, d, host.n);
        EXPECT_EQ(copy_and_wait(c, l, dev, host.p, host.n), ZE_RESULT_SUCCESS);      // from registered
        EXPECT_EQ(copy_and_wait(c, l, host.p, back.p, kPage), ZE_RESULT_SUCCESS);    // into registered
        EXPECT_EQ(copy_and_wait(c, l, back.p, dev, host.n), ZE_RESULT_SUCCESS);
        EXPECT_EQ(std::memcmp(back.p + kPage, host.p + kPage, host.n - kPage), 0);
        EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
        EXPECT_EQ(zeMemFree(c, dev), ZE_RESULT_SUCCESS);
        EXPECT_EQ(zeMemFree(c, mapped), ZE_RESULT_SUCCESS);
        EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
        host.p[0] = 1;  // the host pages are still the caller's
    }
}

TEST_F(FakeZe, RegistrationInATwoDeviceContextIsMappedOnlyForTheFirstDevice) {
    ze_context_handle_t c = context_all();
    Pages host(2 * kPage, 0x5a), other(2 * kPage);
    void* mapped = nullptr;
    ASSERT_EQ(register_host(c, host.p, host.n, &mapped), ZE_RESULT_SUCCESS);
    ze_command_list_handle_t l0 = immediate_list(c, g_devices[0]);
    ze_command_list_handle_t l1 = immediate_list(c, g_devices[1]);
    void* d0 = device_alloc(c, g_devices[0], host.n);
    void* d1 = device_alloc(c, g_devices[1], host.n);
    EXPECT_EQ(copy_and_wait(c, l0, d0, host.p, host.n), ZE_RESULT_SUCCESS);
    EXPECT_EQ(copy_and_wait(c, l1, d1, host.p, host.n), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    EXPECT_EQ(copy_and_wait(c, l1, host.p + kPage, d1, 16), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    // Plain host allocations and pageable memory work on every device of the context.
    void* plain = nullptr;
    ze_host_mem_alloc_desc_t hd{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
    ASSERT_EQ(zeMemAllocHost(c, &hd, host.n, 64, &plain), ZE_RESULT_SUCCESS);
    EXPECT_EQ(copy_and_wait(c, l1, d1, plain, host.n), ZE_RESULT_SUCCESS);
    EXPECT_EQ(copy_and_wait(c, l1, d1, other.p, other.n), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, plain), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, mapped), ZE_RESULT_SUCCESS);

    // A context listing device 1 first still maps for the device that zeDeviceGet lists
    // first; a one-device context maps for its device.
    ze_context_handle_t c10 = context_for({g_devices[1], g_devices[0]});
    ASSERT_EQ(register_host(c10, host.p, host.n, &mapped), ZE_RESULT_SUCCESS);
    EXPECT_EQ(copy_and_wait(c, l1, d1, host.p, host.n), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    EXPECT_EQ(copy_and_wait(c, l0, d0, host.p, host.n), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c10, mapped), ZE_RESULT_SUCCESS);
    ze_context_handle_t c1 = context_for({g_devices[1]});
    ASSERT_EQ(register_host(c1, host.p, host.n, &mapped), ZE_RESULT_SUCCESS);
    EXPECT_EQ(copy_and_wait(c, l1, d1, host.p, host.n), ZE_RESULT_SUCCESS);
    EXPECT_EQ(copy_and_wait(c, l0, d0, host.p, host.n), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    EXPECT_EQ(zeMemFree(c, mapped), ZE_RESULT_ERROR_INVALID_ARGUMENT) << "freed in another context";
    EXPECT_EQ(zeMemFree(c1, mapped), ZE_RESULT_SUCCESS);

    EXPECT_EQ(zeCommandListDestroy(l0), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeCommandListDestroy(l1), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, d0), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, d1), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c1), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c10), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

TEST_F(FakeZe, OverlappingMisalignedAndUnmappedRegistrationsAreRefused) {
    ze_context_handle_t c = context_for({g_devices[0]});
    Pages host(8 * kPage);
    void* a = nullptr;
    void* b = nullptr;
    ASSERT_EQ(register_host(c, host.p + 2 * kPage, 2 * kPage, &a), ZE_RESULT_SUCCESS);
    EXPECT_EQ(register_host(c, host.p + 2 * kPage, 2 * kPage, &b), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    EXPECT_EQ(register_host(c, host.p + 3 * kPage, 2 * kPage, &b), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    EXPECT_EQ(register_host(c, host.p + kPage, 2 * kPage, &b), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    EXPECT_EQ(register_host(c, host.p, 8 * kPage, &b), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    EXPECT_EQ(register_host(c, host.p + 100, kPage, &b), ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT);
    EXPECT_EQ(register_host(c, host.p, kPage + 100, &b), ZE_RESULT_ERROR_UNSUPPORTED_SIZE);
    ASSERT_EQ(register_host(c, host.p, 2 * kPage, &b), ZE_RESULT_SUCCESS) << "adjacent is fine";
    EXPECT_EQ(zeMemFree(c, host.p + 2 * kPage + kPage), ZE_RESULT_ERROR_INVALID_ARGUMENT) << "interior pointer";
    EXPECT_EQ(zeMemFree(c, a), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, a), ZE_RESULT_ERROR_INVALID_ARGUMENT) << "second free";
    EXPECT_EQ(zeMemFree(c, b), ZE_RESULT_SUCCESS);
    // Memory that is not mapped in the process cannot be registered.
    void* hole = mmap(nullptr, 2 * kPage, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(hole, MAP_FAILED);
    munmap(hole, 2 * kPage);
    EXPECT_EQ(register_host(c, hole, 2 * kPage, &b), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

TEST_F(FakeZe, InjectedMemFreeFailureKeepsTheRegistration) {
    ze_context_handle_t c = context_for({g_devices[0]});
    Pages host(2 * kPage, 1), dst(2 * kPage);
    void* mapped = nullptr;
    ASSERT_EQ(register_host(c, host.p, host.n, &mapped), ZE_RESULT_SUCCESS);
    ASSERT_EQ(ctl.set_faults("fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@1"), 0) << ctl.fault_error();
    EXPECT_EQ(zeMemFree(c, mapped), ZE_RESULT_ERROR_DEVICE_LOST);
    EXPECT_EQ(ctl.live_objects(), 2u) << ledger_text();  // context + registration
    EXPECT_NE(ledger_text().find("registration"), std::string::npos);
    ze_command_list_handle_t l = immediate_list(c, g_devices[0]);
    EXPECT_EQ(copy_and_wait(c, l, dst.p, host.p, host.n), ZE_RESULT_SUCCESS) << "still mapped";
    EXPECT_EQ(zeMemFree(c, mapped), ZE_RESULT_SUCCESS) << "the retry succeeds";
    EXPECT_EQ(ctl.call_count("zeMemFree"), 2u);
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

TEST_F(FakeZe, FaultScriptNonIdentityEveryCallNumericCodeAndDelay) {
    ze_context_handle_t c = context_for({g_devices[0]});
    Pages host(2 * kPage);
    ASSERT_EQ(ctl.set_faults("nonidentity:zeMemAllocHost@1 ; fail:zeContextCreate:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY@2+\n"
                             "fail:zeEventPoolCreate:0x70000002 # every call\ndelay:zeContextDestroy:50ms@1"),
              0)
        << ctl.fault_error();
    void* mapped = nullptr;
    ASSERT_EQ(register_host(c, host.p, host.n, &mapped), ZE_RESULT_SUCCESS);
    EXPECT_NE(mapped, host.p) << "non-identity mapping";
    EXPECT_EQ(zeMemFree(c, mapped), ZE_RESULT_SUCCESS);
    ASSERT_EQ(register_host(c, host.p, host.n, &mapped), ZE_RESULT_SUCCESS);
    EXPECT_EQ(mapped, host.p) << "only the first call";
    EXPECT_EQ(zeMemFree(c, mapped), ZE_RESULT_SUCCESS);

    ze_context_desc_t cd{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
    ze_context_handle_t c2 = nullptr, c3 = nullptr;
    EXPECT_EQ(zeContextCreate(g_driver, &cd, &c2), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextCreate(g_driver, &cd, &c3), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    EXPECT_EQ(zeContextCreate(g_driver, &cd, &c3), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    ze_event_pool_desc_t pd{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr, 0, 1};
    ze_event_pool_handle_t pool = nullptr;
    EXPECT_EQ(zeEventPoolCreate(c, &pd, 0, nullptr, &pool), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(zeContextDestroy(c2), ZE_RESULT_SUCCESS);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
    EXPECT_EQ(ctl.call_count("zeContextCreate"), 3u);

    // exec_delay holds the appended command back on the device, not the caller.
    ASSERT_EQ(ctl.set_faults("exec_delay:zeCommandListAppendMemoryCopy:60ms@2"), 0) << ctl.fault_error();
    ze_command_list_handle_t l = immediate_list(c, g_devices[0]);
    std::vector<uint8_t> a(64, 3), b(64, 0);
    {
        Events e(c, 1);
        EXPECT_EQ(copy_and_wait(c, l, b.data(), a.data(), a.size()), ZE_RESULT_SUCCESS);  // call 1: no delay
        t0 = std::chrono::steady_clock::now();
        ASSERT_EQ(zeCommandListAppendMemoryCopy(l, b.data(), a.data(), a.size(), e[0], 0, nullptr), ZE_RESULT_SUCCESS);
        ASSERT_EQ(zeEventHostSynchronize(e[0], UINT64_MAX), ZE_RESULT_SUCCESS);
        EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(60));
    }
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

TEST_F(FakeZe, MalformedFaultScriptsAreRejectedWithAReason) {
    ASSERT_EQ(ctl.set_faults("fail:zeContextCreate:ZE_RESULT_ERROR_DEVICE_LOST@1"), 0);
    const char* bad[] = {
        "zeMemFree",
        "fail:zeMemFree",
        "fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@0",
        "fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@-1",
        "fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@x",
        "fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@99999999999999999999999",
        "fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@*",
        "fail:zeNoSuchCall:ZE_RESULT_ERROR_DEVICE_LOST",
        "fail:zeMemAllocShared:ZE_RESULT_ERROR_DEVICE_LOST",
        "fail:zeMemFree:ZE_RESULT_ERROR_NOPE",
        "fail:zeMemFree:0x1ffffffff",
        "fail:zeMemFree:ZE_RESULT_SUCCESS",
        "nonidentity:zeMemFree",
        "nonidentity:zeMemAllocHost:4096",
        "exec_delay:zeMemFree:5ms",
        "delay:zeMemFree:",
        "delay:zeMemFree:20",
        "delay:zeMemFree:601s",
        "size_limit:zeMemFree:1G:ZE_RESULT_ERROR_UNSUPPORTED_SIZE",
        "exhaust:zeMemFree:1:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY",
        "zeMemFree:1:ZE_RESULT_ERROR_DEVICE_LOST",
        ":::",
        "fail:zeMemFree:ZE_RESULT_ERROR_UNKNOWN; garbage",
        "\x01\x02\xff:1:2",
    };
    for (const char* s : bad) {
        EXPECT_EQ(ctl.set_faults(s), -1) << s;
        EXPECT_NE(std::string(ctl.fault_error()).find("rule "), std::string::npos) << s;
    }
    std::string why = ctl.fault_error();
    EXPECT_NE(why.find("rule 1"), std::string::npos) << why;
    // The previous script is still in force.
    ze_context_desc_t cd{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
    ze_context_handle_t c = nullptr;
    EXPECT_EQ(zeContextCreate(g_driver, &cd, &c), ZE_RESULT_ERROR_DEVICE_LOST);
    EXPECT_EQ(ctl.set_faults(nullptr), 0);
    EXPECT_STREQ(ctl.fault_error(), "");
    EXPECT_EQ(ctl.set_faults(" ; \n ;"), 0);
    EXPECT_EQ(zeContextCreate(g_driver, &cd, &c), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

TEST_F(FakeZe, ConcurrentRegistrationsOfDisjointRangesStayConsistent) {
    ze_context_handle_t c = context_for({g_devices[0]});
    constexpr int kThreads = 4, kRounds = 200;
    Pages host(kThreads * 2 * kPage);
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < kRounds; ++i) {
                void* m = nullptr;
                if (register_host(c, host.p + t * 2 * kPage, 2 * kPage, &m) != ZE_RESULT_SUCCESS ||
                    zeMemFree(c, m) != ZE_RESULT_SUCCESS)
                    ++failures;
            }
        });
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

// ---------------------------------------------------------------------------------
// Copies and events.
TEST_F(FakeZe, RegionCopyHonoursOriginsExtentsAndPitches) {
    ze_context_handle_t c = context_for({g_devices[0]});
    ze_command_list_handle_t l = immediate_list(c, g_devices[0]);
    // 3-D: source pitches 37 / 37*9, destination 50 / 50*7 (device memory).
    const uint32_t sp = 37, ssp = 37 * 9, dp = 50, dsp = 50 * 7;
    const ze_copy_region_t sr{3, 2, 1, 11, 4, 3}, dr{5, 1, 2, 11, 4, 3};
    std::vector<uint8_t> src(ssp * 5), expect(dsp * 6, 0xee), back(dsp * 6, 0);
    fill_pattern(src.data(), src.size(), 2);
    void* dev = device_alloc(c, g_devices[0], expect.size());
    EXPECT_EQ(copy_and_wait(c, l, dev, expect.data(), expect.size()), ZE_RESULT_SUCCESS);  // poison
    for (uint32_t z = 0; z < 3; ++z)
        for (uint32_t y = 0; y < 4; ++y)
            for (uint32_t x = 0; x < 11; ++x)
                expect[(dr.originZ + z) * dsp + (dr.originY + y) * dp + dr.originX + x] =
                    src[(sr.originZ + z) * ssp + (sr.originY + y) * sp + sr.originX + x];
    Events e(c, 1);
    ASSERT_EQ(zeCommandListAppendMemoryCopyRegion(l, dev, &dr, dp, dsp, src.data(), &sr, sp, ssp, e[0], 0, nullptr),
              ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeEventHostSynchronize(e[0], UINT64_MAX), ZE_RESULT_SUCCESS);
    EXPECT_EQ(copy_and_wait(c, l, back.data(), dev, back.size()), ZE_RESULT_SUCCESS);
    EXPECT_EQ(back, expect);

    // 2-D (depth 0): originZ and the slice pitches are ignored.
    const ze_copy_region_t sr2{1, 1, 7, 6, 3, 0}, dr2{0, 2, 9, 6, 3, 0};
    std::vector<uint8_t> dst2(16 * 8, 0xcc), expect2 = dst2;
    for (uint32_t y = 0; y < 3; ++y)
        for (uint32_t x = 0; x < 6; ++x) expect2[(2 + y) * 16 + x] = src[(1 + y) * sp + 1 + x];
    ASSERT_EQ(zeEventHostReset(e[0]), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandListAppendMemoryCopyRegion(l, dst2.data(), &dr2, 16, 0, src.data(), &sr2, sp, 0, e[0], 0,
                                                  nullptr),
              ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeEventHostSynchronize(e[0], UINT64_MAX), ZE_RESULT_SUCCESS);
    EXPECT_EQ(dst2, expect2);

    // Refusals: a row that does not fit its pitch, different extents, a region that
    // runs past a device allocation.
    const ze_copy_region_t wide{30, 0, 0, 11, 2, 0};
    EXPECT_EQ(zeCommandListAppendMemoryCopyRegion(l, dst2.data(), &dr2, 16, 0, src.data(), &sr, sp, ssp, nullptr, 0,
                                                  nullptr),
              ZE_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(zeCommandListAppendMemoryCopyRegion(l, dst2.data(), &wide, 16, 0, src.data(), &wide, sp, 0, nullptr, 0,
                                                  nullptr),
              ZE_RESULT_ERROR_INVALID_ARGUMENT);
    const ze_copy_region_t big{0, 0, 0, 50, 7, 7};
    EXPECT_EQ(zeCommandListAppendMemoryCopyRegion(l, dev, &big, dp, dsp, src.data(), &big, dp, dsp, nullptr, 0, nullptr),
              ZE_RESULT_ERROR_INVALID_ARGUMENT);
    e.release();
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, dev), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

TEST_F(FakeZe, EventsOrderWorkAcrossImmediateLists) {
    ze_context_handle_t c = context_all();
    ze_command_list_handle_t l0 = immediate_list(c, g_devices[0]);
    ze_command_list_handle_t l1 = immediate_list(c, g_devices[1]);
    Events e(c, 3);  // 0: host gate, 1: first copy done, 2: second copy done
    std::vector<uint8_t> a(4096, 1), b(4096, 0), d(4096, 0);
    ASSERT_EQ(zeCommandListAppendWaitOnEvents(l0, 1, &e.ev[0]), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandListAppendMemoryCopy(l0, b.data(), a.data(), a.size(), e[1], 0, nullptr), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandListAppendMemoryCopy(l1, d.data(), b.data(), b.size(), nullptr, 1, &e.ev[1]),
              ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandListAppendBarrier(l1, e[2], 0, nullptr), ZE_RESULT_SUCCESS);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(zeEventQueryStatus(e[2]), ZE_RESULT_NOT_READY);
    EXPECT_EQ(zeEventHostSynchronize(e[2], 1000000), ZE_RESULT_NOT_READY);
    EXPECT_EQ(d[0], 0) << "nothing ran before the gate opened";
    ASSERT_EQ(zeEventHostSignal(e[0]), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeEventHostSynchronize(e[2], UINT64_MAX), ZE_RESULT_SUCCESS);
    EXPECT_EQ(d, a) << "the second copy read what the first wrote";
    EXPECT_EQ(zeEventQueryStatus(e[1]), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeEventHostReset(e[1]), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeEventQueryStatus(e[1]), ZE_RESULT_NOT_READY);
    ASSERT_EQ(zeCommandListAppendSignalEvent(l1, e[1]), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeEventHostSynchronize(e[1], UINT64_MAX), ZE_RESULT_SUCCESS);
    e.release();
    EXPECT_EQ(zeCommandListDestroy(l0), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeCommandListDestroy(l1), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

TEST_F(FakeZe, RegularCommandListRunsOnACommandQueue) {
    ze_context_handle_t c = context_for({g_devices[1]});
    ze_command_queue_desc_t qd{ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, 0, 0, 0,
                               ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS, ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
    ze_command_queue_handle_t q = nullptr;
    ASSERT_EQ(zeCommandQueueCreate(c, g_devices[1], &qd, &q), ZE_RESULT_SUCCESS);
    ze_command_list_desc_t ld{ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC, nullptr, 0, 0};
    ze_command_list_handle_t l = nullptr;
    ASSERT_EQ(zeCommandListCreate(c, g_devices[1], &ld, &l), ZE_RESULT_SUCCESS);
    std::vector<uint8_t> a(1000), b(1000, 0), d(1000, 0);
    fill_pattern(a.data(), a.size(), 3);
    void* dev = device_alloc(c, g_devices[1], a.size());
    ASSERT_EQ(zeCommandListAppendMemoryCopy(l, dev, a.data(), a.size(), nullptr, 0, nullptr), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandListAppendBarrier(l, nullptr, 0, nullptr), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandListAppendMemoryCopy(l, b.data(), dev, a.size(), nullptr, 0, nullptr), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandListClose(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(b[0], 0) << "a regular list runs only when executed";
    ASSERT_EQ(zeCommandQueueExecuteCommandLists(q, 1, &l, nullptr), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandQueueSynchronize(q, UINT64_MAX), ZE_RESULT_SUCCESS);
    EXPECT_EQ(a, b);
    ASSERT_EQ(zeCommandListReset(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeCommandQueueDestroy(q), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, dev), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

// ---------------------------------------------------------------------------------
// Virtual memory.
uint64_t sysman_free(ze_device_handle_t d) {
    uint32_t n = 1;
    zes_mem_handle_t m = nullptr;
    EXPECT_EQ(zesDeviceEnumMemoryModules(reinterpret_cast<zes_device_handle_t>(d), &n, &m), ZE_RESULT_SUCCESS);
    zes_mem_state_t st{};
    st.stype = ZES_STRUCTURE_TYPE_MEM_STATE;
    EXPECT_EQ(zesMemoryGetState(m, &st), ZE_RESULT_SUCCESS);
    return st.free;
}

// True when a forked child touching p dies by SIGSEGV.
bool touch_kills_child(volatile uint8_t* p) {
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);  // no sanitizer or test-framework handler
        p[0] = 1;
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

TEST_F(FakeZe, VirtualMemoryReserveMapUnmapAndFault) {
    ze_device_handle_t d = g_devices[1];
    ze_context_handle_t c = context_for({d});
    size_t page = 0;
    ASSERT_EQ(zeVirtualMemQueryPageSize(c, d, 1, &page), ZE_RESULT_SUCCESS);
    ASSERT_EQ(page, kVmPage);
    void* va = nullptr;
    ASSERT_EQ(zeVirtualMemReserve(c, kHint, 3 * kVmPage, &va), ZE_RESULT_SUCCESS);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(va) % kVmPage, 0u);
    auto* p = static_cast<uint8_t*>(va);
    EXPECT_TRUE(touch_kills_child(p)) << "a reserved, unmapped range faults";

    const uint64_t free0 = sysman_free(d);
    EXPECT_EQ(static_cast<uint64_t>(ctl.device_free_memory(1)), free0);
    ze_physical_mem_desc_t pd{ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, nullptr, 0, 2 * kVmPage};
    ze_physical_mem_handle_t pm = nullptr;
    ASSERT_EQ(zePhysicalMemCreate(c, d, &pd, &pm), ZE_RESULT_SUCCESS);
    EXPECT_EQ(sysman_free(d), free0 - 2 * kVmPage);
    EXPECT_EQ(sysman_free(g_devices[0]), uint64_t(8) << 30) << "counted on its own device only";

    EXPECT_EQ(zeVirtualMemMap(c, p + 4096, kVmPage, pm, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE),
              ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT);
    ASSERT_EQ(zeVirtualMemMap(c, p + kVmPage, 2 * kVmPage, pm, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE),
              ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeVirtualMemMap(c, p + kVmPage, kVmPage, pm, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE),
              ZE_RESULT_ERROR_INVALID_ARGUMENT)
        << "already mapped";
    p[kVmPage + 5] = 42;  // host access works while mapped
    ze_memory_access_attribute_t acc{};
    size_t out = 0;
    ASSERT_EQ(zeVirtualMemGetAccessAttribute(c, p, 3 * kVmPage, &acc, &out), ZE_RESULT_SUCCESS);
    EXPECT_EQ(acc, ZE_MEMORY_ACCESS_ATTRIBUTE_NONE);
    EXPECT_EQ(out, kVmPage);
    ASSERT_EQ(zeVirtualMemGetAccessAttribute(c, p + kVmPage, 2 * kVmPage, &acc, &out), ZE_RESULT_SUCCESS);
    EXPECT_EQ(acc, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE);
    EXPECT_EQ(out, 2 * kVmPage);

    // A device copy into the mapped range.
    ze_command_list_handle_t l = immediate_list(c, d);
    std::vector<uint8_t> src(kVmPage + 1000);
    fill_pattern(src.data(), src.size(), 4);
    EXPECT_EQ(copy_and_wait(c, l, p + kVmPage + 100, src.data(), src.size()), ZE_RESULT_SUCCESS);
    EXPECT_EQ(std::memcmp(p + kVmPage + 100, src.data(), src.size()), 0);
    EXPECT_EQ(copy_and_wait(c, l, p + 2 * kVmPage, src.data(), 2 * kVmPage), ZE_RESULT_ERROR_INVALID_ARGUMENT)
        << "runs past the reservation";

    EXPECT_EQ(zePhysicalMemDestroy(c, pm), ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE);
    EXPECT_EQ(zeVirtualMemFree(c, va, 3 * kVmPage), ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE);
    ASSERT_EQ(zeVirtualMemSetAccessAttribute(c, p + 2 * kVmPage, kVmPage, ZE_MEMORY_ACCESS_ATTRIBUTE_READONLY),
              ZE_RESULT_SUCCESS);
    EXPECT_TRUE(touch_kills_child(p + 2 * kVmPage)) << "read-only page";
    EXPECT_EQ(p[2 * kVmPage], src[kVmPage - 100]);
    ASSERT_EQ(zeVirtualMemUnmap(c, p + kVmPage, 2 * kVmPage), ZE_RESULT_SUCCESS);
    EXPECT_TRUE(touch_kills_child(p + kVmPage + 5)) << "unmapped again";
    EXPECT_EQ(zeVirtualMemUnmap(c, p + kVmPage, kVmPage), ZE_RESULT_ERROR_INVALID_ARGUMENT) << "not mapped";

    // Remap at the same address: the contents of the physical memory are back.
    ASSERT_EQ(zeVirtualMemMap(c, p, kVmPage, pm, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE), ZE_RESULT_SUCCESS);
    EXPECT_EQ(p[5], 42);
    ASSERT_EQ(zeVirtualMemUnmap(c, p, kVmPage), ZE_RESULT_SUCCESS);

    EXPECT_EQ(zePhysicalMemDestroy(c, pm), ZE_RESULT_SUCCESS);
    EXPECT_EQ(sysman_free(d), free0);
    EXPECT_EQ(zeVirtualMemFree(c, va, 3 * kVmPage), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

TEST_F(FakeZe, CopyIntoMemoryUnmappedBeforeItRunsIsADeviceFault) {
    ze_device_handle_t d = g_devices[0];
    ze_context_handle_t c = context_for({d});
    void* va = nullptr;
    ASSERT_EQ(zeVirtualMemReserve(c, kHint, kVmPage, &va), ZE_RESULT_SUCCESS);
    ze_physical_mem_desc_t pd{ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, nullptr, 0, kVmPage};
    ze_physical_mem_handle_t pm = nullptr;
    ASSERT_EQ(zePhysicalMemCreate(c, d, &pd, &pm), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeVirtualMemMap(c, va, kVmPage, pm, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE), ZE_RESULT_SUCCESS);
    ze_command_list_handle_t l = immediate_list(c, d);
    std::vector<uint8_t> src(4096, 9);
    {
        Events e(c, 2);  // 0: done, 1: gate that holds the copy back
        ASSERT_EQ(zeCommandListAppendMemoryCopy(l, va, src.data(), src.size(), e[0], 1, &e.ev[1]),
                  ZE_RESULT_SUCCESS);
        ASSERT_EQ(zeVirtualMemUnmap(c, va, kVmPage), ZE_RESULT_SUCCESS);  // while the copy is in flight
        ASSERT_EQ(zeEventHostSignal(e[1]), ZE_RESULT_SUCCESS);
        // The event completes (no waiter hangs) but reports the loss.
        EXPECT_EQ(zeEventHostSynchronize(e[0], UINT64_MAX), ZE_RESULT_ERROR_DEVICE_LOST);
        EXPECT_EQ(zeEventQueryStatus(e[0]), ZE_RESULT_ERROR_DEVICE_LOST);
        EXPECT_EQ(zeCommandListAppendBarrier(l, nullptr, 0, nullptr), ZE_RESULT_ERROR_DEVICE_LOST);
    }
    EXPECT_EQ(ctl.device_faults(), 1u);
    EXPECT_NE(ledger_text().find("not mapped"), std::string::npos) << ledger_text();
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);

    // Pageable host memory unmapped before the copy runs: a fault, not a crash.
    l = immediate_list(c, d);
    // Placed far below the mmap area: a page-sized hole there is not handed to
    // the next mmap (made by any thread, e.g. the ASan allocator's) before the
    // copy runs, which would make the source readable again.
    void* const far = reinterpret_cast<void*>(uintptr_t{0x300000000000});
    void* gone = mmap(far, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (gone == MAP_FAILED) gone = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(gone, MAP_FAILED);
    {
        Events e(c, 2);
        ASSERT_EQ(zeCommandListAppendMemoryCopy(l, src.data(), gone, kPage, e[0], 1, &e.ev[1]), ZE_RESULT_SUCCESS);
        munmap(gone, kPage);
        ASSERT_EQ(zeEventHostSignal(e[1]), ZE_RESULT_SUCCESS);
        EXPECT_EQ(zeEventHostSynchronize(e[0], UINT64_MAX), ZE_RESULT_ERROR_DEVICE_LOST);
    }
    EXPECT_EQ(ctl.device_faults(), 2u) << ledger_text();
    expected_device_faults = 2;
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zePhysicalMemDestroy(c, pm), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeVirtualMemFree(c, va, kVmPage), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

// ---------------------------------------------------------------------------------
// Ledger and device memory.
TEST_F(FakeZe, LedgerListsLiveObjectsAndIsEmptyAfterCleanup) {
    ze_device_handle_t d = g_devices[0];
    ze_context_handle_t c = context_for({d});
    Pages host(kPage);
    void* reg = nullptr;
    ASSERT_EQ(register_host(c, host.p, host.n, &reg), ZE_RESULT_SUCCESS);
    void* plain = nullptr;
    ze_host_mem_alloc_desc_t hd{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
    ASSERT_EQ(zeMemAllocHost(c, &hd, 100, 0, &plain), ZE_RESULT_SUCCESS);
    void* dev = device_alloc(c, d, 1 << 20);
    ze_command_list_handle_t l = immediate_list(c, d);
    void* va = nullptr;
    ASSERT_EQ(zeVirtualMemReserve(c, kHint, kVmPage, &va), ZE_RESULT_SUCCESS);
    ze_physical_mem_desc_t pd{ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, nullptr, 0, kVmPage};
    ze_physical_mem_handle_t pm = nullptr;
    ASSERT_EQ(zePhysicalMemCreate(c, d, &pd, &pm), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeVirtualMemMap(c, va, kVmPage, pm, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE), ZE_RESULT_SUCCESS);
    {
        Events e(c, 2);
        // context, registration, host, device, list, reservation, physical, mapping,
        // pool, 2 events
        EXPECT_EQ(ctl.live_objects(), 11u) << ledger_text();
        std::string text = ledger_text();
        for (const char* word : {"context", "registration", "host allocation", "device allocation",
                                 "immediate command list", "reservation", "physical memory", "mapping", "event pool",
                                 "event "})
            EXPECT_NE(text.find(word), std::string::npos) << word << "\n" << text;
        EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE);
    }
    EXPECT_EQ(static_cast<uint64_t>(ctl.device_free_memory(0)), (uint64_t(8) << 30) - (1 << 20) - kVmPage);
    EXPECT_EQ(zeVirtualMemUnmap(c, va, kVmPage), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zePhysicalMemDestroy(c, pm), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeVirtualMemFree(c, va, kVmPage), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, dev), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, plain), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, reg), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
    EXPECT_EQ(ctl.live_objects(), 0u);
    EXPECT_EQ(ledger_text().rfind("live objects: 0\n", 0), 0u) << ledger_text();
    EXPECT_EQ(ctl.device_free_memory(0), int64_t(8) << 30);
}

TEST_F(FakeZe, ResetReleasesEverything) {
    ze_context_handle_t c = context_all();
    (void)device_alloc(c, g_devices[1], 4096);
    ze_command_list_handle_t l = immediate_list(c, g_devices[1]);
    ze_event_pool_desc_t pd{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr, 0, 1};
    ze_event_pool_handle_t pool = nullptr;
    ASSERT_EQ(zeEventPoolCreate(c, &pd, 0, nullptr, &pool), ZE_RESULT_SUCCESS);
    ze_event_desc_t ed{ZE_STRUCTURE_TYPE_EVENT_DESC, nullptr, 0, 0, 0};
    ze_event_handle_t ev = nullptr;
    ASSERT_EQ(zeEventCreate(pool, &ed, &ev), ZE_RESULT_SUCCESS);
    std::vector<uint8_t> a(64), b(64);
    // Work blocked on an event that nobody signals.
    ASSERT_EQ(zeCommandListAppendMemoryCopy(l, b.data(), a.data(), a.size(), nullptr, 1, &ev), ZE_RESULT_SUCCESS);
    EXPECT_EQ(ctl.live_objects(), 5u) << ledger_text();
    ctl.reset();
    EXPECT_EQ(ctl.live_objects(), 0u);
    EXPECT_EQ(ctl.device_free_memory(1), int64_t(8) << 30);
    // Released handles are stale.
    EXPECT_EQ(zeEventDestroy(ev), ZE_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(zeEventPoolDestroy(pool), ZE_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_ERROR_INVALID_ARGUMENT);
}

TEST_F(FakeZe, DeviceMemoryIsCountedAndCanRunOut) {
    ze_device_handle_t d = g_devices[0];
    ze_context_handle_t c = context_for({d});
    ze_device_mem_alloc_desc_t desc{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
    void* big = nullptr;
    void* more = nullptr;
    // The fake does not touch the bytes, so a large allocation costs nothing.
    ASSERT_EQ(zeMemAllocDevice(c, &desc, (size_t(7) << 30), 0, d, &big), ZE_RESULT_SUCCESS);
    EXPECT_EQ(sysman_free(d), uint64_t(1) << 30);
    EXPECT_EQ(zeMemAllocDevice(c, &desc, (size_t(2) << 30), 0, d, &more), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    ze_physical_mem_desc_t pd{ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, nullptr, 0, size_t(2) << 30};
    ze_physical_mem_handle_t pm = nullptr;
    EXPECT_EQ(zePhysicalMemCreate(c, d, &pd, &pm), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    EXPECT_EQ(zeMemAllocDevice(c, &desc, 4096, 0, g_devices[1], &more), ZE_RESULT_ERROR_DEVICE_LOST)
        << "device outside the context";
    EXPECT_EQ(zeMemFree(c, big), ZE_RESULT_SUCCESS);
    EXPECT_EQ(sysman_free(d), uint64_t(8) << 30);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

// ---------------------------------------------------------------------------------
// Fault scripts: the shared grammar's refusals, size_limit and exhaust.
// The old form entry:when:action is refused with the same rule in the new form, and
// that spelling is accepted; the shared parser's other refusals name their reason.
TEST_F(FakeZe, OldFormsAreRefusedWithTheirNewSpelling) {
    const std::pair<const char*, const char*> old_new[] = {
        {"zeMemFree:1:ZE_RESULT_ERROR_DEVICE_LOST", "fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@1"},
        {"zeMemAllocHost:*:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY", "fail:zeMemAllocHost:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY"},
        {"zeMemFree:3+:0x70000002", "fail:zeMemFree:0x70000002@3+"},
        {"zeMemAllocHost:2+:nonidentity", "nonidentity:zeMemAllocHost@2+"},
        {"zeVirtualMemMap:*:delay=20", "delay:zeVirtualMemMap:20ms"},
        {"zeCommandListAppendMemoryCopy:1:exec_delay=200", "exec_delay:zeCommandListAppendMemoryCopy:200ms@1"},
    };
    for (auto [old_rule, new_rule] : old_new) {
        EXPECT_EQ(ctl.set_faults(old_rule), -1) << old_rule;
        const std::string why = ctl.fault_error();
        EXPECT_NE(why.find(std::string("the old form ENTRY:WHEN:ACTION is gone (rules are ACTION:ENTRY:ARG[@WHEN]): "
                                       "write '") + new_rule + "'"),
                  std::string::npos)
            << why;
        EXPECT_EQ(ctl.set_faults(new_rule), 0) << new_rule << ": " << ctl.fault_error();
    }
    const std::pair<const char*, const char*> refused[] = {
        {"fail:zeNoSuchCall:ZE_RESULT_ERROR_DEVICE_LOST",
         "unknown entry point 'zeNoSuchCall' (the fake Level Zero driver does not implement it)"},
        {"fail:zeMemFree:ZE_RESULT_ERROR_NOPE", "unknown ze_result_t 'ZE_RESULT_ERROR_NOPE'"},
        {"fail:zeMemFree:0x80000000", "(a name or a number 1..2147483647)"},
        {"fail:zeMemFree:ZE_RESULT_SUCCESS", "'ZE_RESULT_SUCCESS' is success, not a failure"},
        {"fail:zeMemFree:ZE_RESULT_ERROR_UNKNOWN@0", "bad call number '0'"},
        {"fail:zeMemFree:ZE_RESULT_ERROR_UNKNOWN@*", "bad call number '*'"},
        {"delay:zeVirtualMemMap:20", "no unit: write 'delay:zeVirtualMemMap:20us'"},
        {"exec_delay:zeVirtualMemMap:2ms", "exec_delay does not apply to 'zeVirtualMemMap' (it applies to: "
                                           "zeCommandListAppendMemoryCopy, zeCommandListAppendMemoryCopyRegion,"},
        {"nonidentity:zeMemAllocHost:0x1000", "expected nonidentity:ENTRY[@WHEN]"},
        {"size_limit:zeMemFree:1G:ZE_RESULT_ERROR_UNSUPPORTED_SIZE",
         "size_limit does not apply to 'zeMemFree' (it applies to: zeMemAllocHost, zeMemAllocDevice,"},
        {"exhaust:zeMemFree:4:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY",
         "exhaust does not apply to 'zeMemFree' (it applies to: zeContextCreate, zeContextCreateEx,"},
    };
    for (auto [script, why] : refused) {
        EXPECT_EQ(ctl.set_faults(script), -1) << script;
        EXPECT_NE(std::string(ctl.fault_error()).find(why), std::string::npos) << ctl.fault_error();
    }
    EXPECT_EQ(ctl.set_faults(nullptr), 0);
}

// size_limit: a call whose size exceeds the limit answers the code and does nothing;
// smaller calls run.
TEST_F(FakeZe, SizeLimitRefusesOnlyCallsAboveTheLimit) {
    ze_device_handle_t d = g_devices[0];
    ze_context_handle_t c = context_for({d});
    ASSERT_EQ(ctl.set_faults("size_limit:zeMemAllocHost:8K:ZE_RESULT_ERROR_UNSUPPORTED_SIZE\n"
                             "size_limit:zeMemAllocDevice:1M:ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY\n"
                             "size_limit:zePhysicalMemCreate:2M:ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY\n"
                             "size_limit:zeVirtualMemReserve:4M:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY\n"
                             "size_limit:zeVirtualMemMap:2M:ZE_RESULT_ERROR_INVALID_ARGUMENT\n"
                             "size_limit:zeCommandListAppendMemoryCopy:16:ZE_RESULT_ERROR_INVALID_SIZE"),
              0)
        << ctl.fault_error();
    Pages host(3 * kPage);
    void* reg = nullptr;
    EXPECT_EQ(register_host(c, host.p, 3 * kPage, &reg), ZE_RESULT_ERROR_UNSUPPORTED_SIZE);
    EXPECT_EQ(ctl.live_objects(), 1u) << ledger_text();  // the context: nothing registered
    ASSERT_EQ(register_host(c, host.p, 2 * kPage, &reg), ZE_RESULT_SUCCESS);

    const uint64_t free0 = sysman_free(d);
    ze_device_mem_alloc_desc_t dd{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
    void* dev = nullptr;
    EXPECT_EQ(zeMemAllocDevice(c, &dd, (1u << 20) + 1, 0, d, &dev), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    EXPECT_EQ(sysman_free(d), free0) << "a refused allocation takes no memory";
    ASSERT_EQ(zeMemAllocDevice(c, &dd, 1u << 20, 0, d, &dev), ZE_RESULT_SUCCESS);

    ze_physical_mem_desc_t big{ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, nullptr, 0, 2 * kVmPage};
    ze_physical_mem_desc_t one{ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, nullptr, 0, kVmPage};
    ze_physical_mem_handle_t pm = nullptr;
    EXPECT_EQ(zePhysicalMemCreate(c, d, &big, &pm), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    ASSERT_EQ(zePhysicalMemCreate(c, d, &one, &pm), ZE_RESULT_SUCCESS);
    void* va = nullptr;
    EXPECT_EQ(zeVirtualMemReserve(c, kHint, 3 * kVmPage, &va), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    ASSERT_EQ(zeVirtualMemReserve(c, kHint, 2 * kVmPage, &va), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeVirtualMemMap(c, va, 2 * kVmPage, pm, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE),
              ZE_RESULT_ERROR_INVALID_ARGUMENT);
    ASSERT_EQ(zeVirtualMemMap(c, va, kVmPage, pm, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE), ZE_RESULT_SUCCESS);

    ze_command_list_handle_t l = immediate_list(c, d);
    std::vector<uint8_t> src(32, 9), dst(32, 0);
    EXPECT_EQ(copy_and_wait(c, l, dst.data(), src.data(), 17), ZE_RESULT_ERROR_INVALID_SIZE);
    EXPECT_EQ(dst[0], 0);
    EXPECT_EQ(copy_and_wait(c, l, dst.data(), src.data(), 16), ZE_RESULT_SUCCESS);
    EXPECT_EQ(dst[15], 9);
    // context, registration, device allocation, physical memory, reservation, mapping, list
    EXPECT_EQ(ctl.live_objects(), 7u) << ledger_text();
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeVirtualMemUnmap(c, va, kVmPage), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeVirtualMemFree(c, va, 2 * kVmPage), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zePhysicalMemDestroy(c, pm), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, dev), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, reg), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

// exhaust: once N objects made by the entry are alive, its calls answer the code until
// one is destroyed; objects made before the script count too.
TEST_F(FakeZe, ExhaustRefusesWhileNObjectsLiveAndRecoversAfterADestroy) {
    ze_device_handle_t d = g_devices[0];
    ze_context_handle_t c = context_for({d});
    ze_physical_mem_desc_t pd{ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, nullptr, 0, kVmPage};
    ze_physical_mem_handle_t pm[3] = {};
    ASSERT_EQ(zePhysicalMemCreate(c, d, &pd, &pm[0]), ZE_RESULT_SUCCESS);  // before the script
    ASSERT_EQ(ctl.set_faults("exhaust:zePhysicalMemCreate:2:ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY\n"
                             "exhaust:zeMemAllocHost:1:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY\n"
                             "exhaust:zeCommandListCreateImmediate:1:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY\n"
                             "exhaust:zeEventCreate:1:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY\n"
                             "exhaust:zeContextCreateEx:1:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY"),
              0)
        << ctl.fault_error();
    const uint64_t free0 = sysman_free(d);
    ASSERT_EQ(zePhysicalMemCreate(c, d, &pd, &pm[1]), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zePhysicalMemCreate(c, d, &pd, &pm[2]), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    EXPECT_EQ(zePhysicalMemCreate(c, d, &pd, &pm[2]), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY) << "until one goes";
    EXPECT_EQ(sysman_free(d), free0 - kVmPage) << "a refused create takes no memory";
    EXPECT_EQ(ctl.live_objects(), 3u) << ledger_text();  // context, two physical memories
    ASSERT_EQ(zePhysicalMemDestroy(c, pm[0]), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zePhysicalMemCreate(c, d, &pd, &pm[2]), ZE_RESULT_SUCCESS) << "room again";

    // Plain host allocations and registrations are both made by zeMemAllocHost.
    Pages x(kPage), y(kPage);
    void* rx = nullptr;
    void* ry = nullptr;
    ASSERT_EQ(register_host(c, x.p, kPage, &rx), ZE_RESULT_SUCCESS);
    EXPECT_EQ(register_host(c, y.p, kPage, &ry), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    ze_host_mem_alloc_desc_t hd{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
    void* plain = nullptr;
    EXPECT_EQ(zeMemAllocHost(c, &hd, 64, 0, &plain), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    ASSERT_EQ(zeMemFree(c, rx), ZE_RESULT_SUCCESS);
    ASSERT_EQ(register_host(c, y.p, kPage, &ry), ZE_RESULT_SUCCESS);

    ze_command_list_handle_t l1 = immediate_list(c, d);
    ze_command_queue_desc_t q{ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, 0, 0, 0,
                              ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS, ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
    ze_command_list_handle_t l2 = nullptr;
    EXPECT_EQ(zeCommandListCreateImmediate(c, d, &q, &l2), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    ASSERT_EQ(zeCommandListDestroy(l1), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandListCreateImmediate(c, d, &q, &l2), ZE_RESULT_SUCCESS);

    ze_event_pool_desc_t epd{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr, ZE_EVENT_POOL_FLAG_HOST_VISIBLE, 2};
    ze_event_pool_handle_t pool = nullptr;
    ASSERT_EQ(zeEventPoolCreate(c, &epd, 0, nullptr, &pool), ZE_RESULT_SUCCESS);
    ze_event_desc_t e0{ZE_STRUCTURE_TYPE_EVENT_DESC, nullptr, 0, ZE_EVENT_SCOPE_FLAG_HOST, ZE_EVENT_SCOPE_FLAG_HOST};
    ze_event_desc_t e1 = e0;
    e1.index = 1;
    ze_event_handle_t ev0 = nullptr, ev1 = nullptr;
    ASSERT_EQ(zeEventCreate(pool, &e0, &ev0), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeEventCreate(pool, &e1, &ev1), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    ASSERT_EQ(zeEventDestroy(ev0), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeEventCreate(pool, &e1, &ev1), ZE_RESULT_SUCCESS);

    ze_context_desc_t cd{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
    ze_context_handle_t c2 = nullptr;
    EXPECT_EQ(zeContextCreateEx(g_driver, &cd, 1, &d, &c2), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)
        << "one context is alive already";

    // context, two physical memories, a registration, a list, a pool, an event
    EXPECT_EQ(ctl.live_objects(), 7u) << ledger_text();
    EXPECT_EQ(zeEventDestroy(ev1), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeEventPoolDestroy(pool), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeCommandListDestroy(l2), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, ry), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zePhysicalMemDestroy(c, pm[1]), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zePhysicalMemDestroy(c, pm[2]), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeContextCreateEx(g_driver, &cd, 1, &d, &c2), ZE_RESULT_SUCCESS) << "room again";
    EXPECT_EQ(zeContextDestroy(c2), ZE_RESULT_SUCCESS);
}

// ---------------------------------------------------------------------------------
// Child modes (see run_child).
int child_main(const std::string& mode) {
    std::setvbuf(stdout, nullptr, _IONBF, 0);  // output survives any abnormal exit
    ze_result_t r = zeInit(ZE_INIT_FLAG_GPU_ONLY);
    if (mode == "init") {
        std::printf("zeInit=0x%x\n", static_cast<unsigned>(r));
        return 0;
    }
    if (r != ZE_RESULT_SUCCESS) {
        std::printf("zeInit failed 0x%x\n", static_cast<unsigned>(r));
        return 1;
    }
    uint32_t n = 1;
    ze_driver_handle_t drv = nullptr;
    zeDriverGet(&n, &drv);
    uint32_t nd = 0;
    zeDeviceGet(drv, &nd, nullptr);
    std::vector<ze_device_handle_t> devs(nd);
    zeDeviceGet(drv, &nd, devs.data());
    std::string out;
    for (auto d : devs) {
        ze_device_properties_t p{};
        p.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
        zeDeviceGetProperties(d, &p);
        // The UUID's last byte and the name's number both name the native device.
        std::string name = p.name;
        if (name.back() - '0' != p.uuid.id[15]) return 2;
        out += (out.empty() ? "" : ",") + std::to_string(p.uuid.id[15]);
    }
    std::printf("%s\n", out.c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    g_self.assign(self, n > 0 ? static_cast<size_t>(n) : 0);
    for (int i = 1; i < argc; ++i)
        if (std::strncmp(argv[i], "--xmc-child=", 12) == 0) return child_main(argv[i] + 12);
    ::testing::InitGoogleTest(&argc, argv);
    init_process();
    return RUN_ALL_TESTS();
}
