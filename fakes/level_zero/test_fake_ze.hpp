// What the tests of the fake Level Zero driver share (test_fake_ze*.cpp, one part of the driver
// each): the process-wide state main() sets up, the control API, small helpers around the API and
// the fixture.
#pragma once
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

#include "fake_ze_control.h"
#include "ze_external_memmap.h"

namespace fake_ze_test {

inline constexpr size_t kPage = 4096;
inline constexpr size_t kVmPage = size_t(2) << 20;
// zeVirtualMemReserve's start hint: the validation layer refuses a null one.
inline void* const kHint = reinterpret_cast<void*>(kVmPage);

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
inline Control ctl;
inline bool g_ctl_ok = false;
inline ze_result_t g_init = ZE_RESULT_ERROR_UNINITIALIZED;
inline uint64_t g_init_calls = 0;  // calls of the driver's zeInit, right after zeInit
inline ze_driver_handle_t g_driver = nullptr;
inline std::vector<ze_device_handle_t> g_devices;
inline std::string g_self;  // this executable

inline std::string ledger_text() {
    if (!g_ctl_ok) return "(no control API)";
    std::string s(ctl.ledger(nullptr, 0) + 1, '\0');
    ctl.ledger(s.data(), s.size());
    s.resize(s.size() - 1);
    return s;
}

inline bool validation_requested() {
    const char* v = std::getenv("ZE_ENABLE_VALIDATION_LAYER");
    return v != nullptr && std::string(v) == "1";
}

// Loads the control API from the already loaded fake.
inline void load_control() {
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

inline void init_process() {
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
inline std::string run_child(const std::string& env, const std::string& mode) {
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
inline ze_device_properties_t props_of(ze_device_handle_t d) {
    ze_device_properties_t p{};
    p.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
    EXPECT_EQ(zeDeviceGetProperties(d, &p), ZE_RESULT_SUCCESS);
    return p;
}

inline ze_context_handle_t context_for(std::vector<ze_device_handle_t> devices) {
    ze_context_desc_t desc{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
    ze_context_handle_t c = nullptr;
    EXPECT_EQ(zeContextCreateEx(g_driver, &desc, static_cast<uint32_t>(devices.size()), devices.data(), &c),
              ZE_RESULT_SUCCESS);
    return c;
}

inline ze_context_handle_t context_all() {
    ze_context_desc_t desc{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
    ze_context_handle_t c = nullptr;
    EXPECT_EQ(zeContextCreate(g_driver, &desc, &c), ZE_RESULT_SUCCESS);
    return c;
}

inline ze_command_list_handle_t immediate_list(ze_context_handle_t c, ze_device_handle_t d) {
    ze_command_queue_desc_t q{ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, 0, 0, 0,
                              ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS, ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
    ze_command_list_handle_t l = nullptr;
    EXPECT_EQ(zeCommandListCreateImmediate(c, d, &q, &l), ZE_RESULT_SUCCESS);
    return l;
}

inline void* device_alloc(ze_context_handle_t c, ze_device_handle_t d, size_t n) {
    ze_device_mem_alloc_desc_t desc{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
    void* p = nullptr;
    EXPECT_EQ(zeMemAllocDevice(c, &desc, n, 64, d, &p), ZE_RESULT_SUCCESS);
    return p;
}

// zeMemAllocHost with the external-memmap descriptor.
inline ze_result_t register_host(ze_context_handle_t c, void* mem, size_t n, void** out) {
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
inline ze_result_t copy_and_wait(ze_context_handle_t c, ze_command_list_handle_t l, void* dst, const void* src, size_t n) {
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

inline void fill_pattern(uint8_t* p, size_t n, uint32_t seed) {
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


// The free memory the device reports through Sysman.
inline uint64_t sysman_free(ze_device_handle_t d) {
    uint32_t n = 1;
    zes_mem_handle_t m = nullptr;
    EXPECT_EQ(zesDeviceEnumMemoryModules(reinterpret_cast<zes_device_handle_t>(d), &n, &m), ZE_RESULT_SUCCESS);
    zes_mem_state_t st{};
    st.stype = ZES_STRUCTURE_TYPE_MEM_STATE;
    EXPECT_EQ(zesMemoryGetState(m, &st), ZE_RESULT_SUCCESS);
    return st.free;
}

}  // namespace fake_ze_test
