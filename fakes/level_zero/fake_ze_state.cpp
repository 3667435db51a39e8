// Global state, configuration from the environment, the fault-script dialect (the
// grammar and its parser are shared: fakes/README.md, fakes/common/), and the control
// API (fake_ze_control.h).
#include "fake_ze_control.h"
#include "fake_ze_internal.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

namespace xmc_fake_ze {

State& S() {
    static State* state = new State;  // intentionally leaked: see the header
    return *state;
}

uint64_t handle_id(const void* h, Kind k) {
    const uint64_t v = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(h));
    if ((v >> 40) != static_cast<uint64_t>(k) || (v & 0xf) != 0) return 0;
    return (v & ((uint64_t(1) << 40) - 1)) >> 4;
}

// ---------------------------------------------------------------------------------
// Result names.
namespace {

struct NamedResult {
    const char* name;
    ze_result_t value;
};

const NamedResult kResults[] = {
    {"ZE_RESULT_SUCCESS", ZE_RESULT_SUCCESS},
    {"ZE_RESULT_NOT_READY", ZE_RESULT_NOT_READY},
    {"ZE_RESULT_ERROR_DEVICE_LOST", ZE_RESULT_ERROR_DEVICE_LOST},
    {"ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY", ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY},
    {"ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY", ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY},
    {"ZE_RESULT_ERROR_MODULE_BUILD_FAILURE", ZE_RESULT_ERROR_MODULE_BUILD_FAILURE},
    {"ZE_RESULT_ERROR_MODULE_LINK_FAILURE", ZE_RESULT_ERROR_MODULE_LINK_FAILURE},
    {"ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET", ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET},
    {"ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE", ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE},
    {"ZE_RESULT_EXP_ERROR_DEVICE_IS_NOT_VERTEX", ZE_RESULT_EXP_ERROR_DEVICE_IS_NOT_VERTEX},
    {"ZE_RESULT_EXP_ERROR_VERTEX_IS_NOT_DEVICE", ZE_RESULT_EXP_ERROR_VERTEX_IS_NOT_DEVICE},
    {"ZE_RESULT_EXP_ERROR_REMOTE_DEVICE", ZE_RESULT_EXP_ERROR_REMOTE_DEVICE},
    {"ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS", ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS},
    {"ZE_RESULT_ERROR_NOT_AVAILABLE", ZE_RESULT_ERROR_NOT_AVAILABLE},
    {"ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE", ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE},
    {"ZE_RESULT_WARNING_DROPPED_DATA", ZE_RESULT_WARNING_DROPPED_DATA},
    {"ZE_RESULT_ERROR_UNINITIALIZED", ZE_RESULT_ERROR_UNINITIALIZED},
    {"ZE_RESULT_ERROR_UNSUPPORTED_VERSION", ZE_RESULT_ERROR_UNSUPPORTED_VERSION},
    {"ZE_RESULT_ERROR_UNSUPPORTED_FEATURE", ZE_RESULT_ERROR_UNSUPPORTED_FEATURE},
    {"ZE_RESULT_ERROR_INVALID_ARGUMENT", ZE_RESULT_ERROR_INVALID_ARGUMENT},
    {"ZE_RESULT_ERROR_INVALID_NULL_HANDLE", ZE_RESULT_ERROR_INVALID_NULL_HANDLE},
    {"ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE", ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE},
    {"ZE_RESULT_ERROR_INVALID_NULL_POINTER", ZE_RESULT_ERROR_INVALID_NULL_POINTER},
    {"ZE_RESULT_ERROR_INVALID_SIZE", ZE_RESULT_ERROR_INVALID_SIZE},
    {"ZE_RESULT_ERROR_UNSUPPORTED_SIZE", ZE_RESULT_ERROR_UNSUPPORTED_SIZE},
    {"ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT", ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT},
    {"ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT", ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT},
    {"ZE_RESULT_ERROR_INVALID_ENUMERATION", ZE_RESULT_ERROR_INVALID_ENUMERATION},
    {"ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION", ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION},
    {"ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT", ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT},
    {"ZE_RESULT_ERROR_INVALID_NATIVE_BINARY", ZE_RESULT_ERROR_INVALID_NATIVE_BINARY},
    {"ZE_RESULT_ERROR_INVALID_GLOBAL_NAME", ZE_RESULT_ERROR_INVALID_GLOBAL_NAME},
    {"ZE_RESULT_ERROR_INVALID_KERNEL_NAME", ZE_RESULT_ERROR_INVALID_KERNEL_NAME},
    {"ZE_RESULT_ERROR_INVALID_FUNCTION_NAME", ZE_RESULT_ERROR_INVALID_FUNCTION_NAME},
    {"ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION", ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION},
    {"ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION", ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION},
    {"ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX", ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX},
    {"ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE", ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE},
    {"ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE", ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE},
    {"ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED", ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED},
    {"ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE", ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE},
    {"ZE_RESULT_ERROR_OVERLAPPING_REGIONS", ZE_RESULT_ERROR_OVERLAPPING_REGIONS},
    {"ZE_RESULT_WARNING_ACTION_REQUIRED", ZE_RESULT_WARNING_ACTION_REQUIRED},
    {"ZE_RESULT_ERROR_UNKNOWN", ZE_RESULT_ERROR_UNKNOWN},
};

// What exhaust counts: the live objects an entry point made (lock held); the same
// objects the ledger lists. Both context entries count every context.
uint64_t live_contexts() { return S().contexts.size(); }
uint64_t count_allocs(bool device) {
    uint64_t n = 0;
    for (const auto& [base, a] : S().allocs) n += (a.type == AllocType::Device) == device ? 1 : 0;
    return n;
}
uint64_t live_host_allocs() { return count_allocs(false); }  // registrations included
uint64_t live_device_allocs() { return count_allocs(true); }
uint64_t live_reservations() { return S().reservations.size(); }
uint64_t live_physmems() { return S().physmems.size(); }
uint64_t live_mappings() { return S().mappings.size(); }
uint64_t live_queues() { return S().queues.size(); }
uint64_t count_lists(bool immediate) {
    uint64_t n = 0;
    for (const auto& [id, l] : S().lists) n += l->immediate == immediate ? 1 : 0;
    return n;
}
uint64_t live_lists() { return count_lists(false); }
uint64_t live_immediate_lists() { return count_lists(true); }
uint64_t live_pools() { return S().pools.size(); }
uint64_t live_events() { return S().events.size(); }

// Every entry point the fake implements, and what fault scripts can do to it beyond
// fail and delay (fakes/README.md): {name, takes a size, queues work (exec_delay),
// nonidentity, live objects it made (exhaust)}. The entries marked as taking a size
// pass it to enter().
const xmc_faults::Entry kEntries[] = {
    {"zeInit"},
    {"zeDriverGet"}, {"zeDriverGetApiVersion"}, {"zeDriverGetProperties"},
    {"zeDriverGetExtensionProperties"},
    {"zeDeviceGet"}, {"zeDeviceGetProperties"}, {"zeDeviceGetMemoryProperties"},
    {"zeDeviceGetCommandQueueGroupProperties"},
    {"zeContextCreate", false, false, false, live_contexts},
    {"zeContextCreateEx", false, false, false, live_contexts},
    {"zeContextDestroy"},
    {"zeMemAllocHost", true, false, true, live_host_allocs},
    {"zeMemAllocDevice", true, false, false, live_device_allocs},
    {"zeMemFree"}, {"zeMemGetAllocProperties"}, {"zeMemGetAddressRange"},
    {"zeVirtualMemReserve", true, false, false, live_reservations},
    {"zeVirtualMemFree"}, {"zeVirtualMemQueryPageSize"},
    {"zeVirtualMemMap", true, false, false, live_mappings},
    {"zeVirtualMemUnmap"}, {"zeVirtualMemSetAccessAttribute"}, {"zeVirtualMemGetAccessAttribute"},
    {"zePhysicalMemCreate", true, false, false, live_physmems},
    {"zePhysicalMemDestroy"},
    {"zeCommandQueueCreate", false, false, false, live_queues},
    {"zeCommandQueueDestroy"}, {"zeCommandQueueExecuteCommandLists"}, {"zeCommandQueueSynchronize"},
    {"zeCommandListCreate", false, false, false, live_lists},
    {"zeCommandListCreateImmediate", false, false, false, live_immediate_lists},
    {"zeCommandListDestroy"}, {"zeCommandListClose"}, {"zeCommandListReset"},
    {"zeCommandListAppendMemoryCopy", true, true},
    {"zeCommandListAppendMemoryCopyRegion", false, true},
    {"zeCommandListAppendBarrier", false, true},
    {"zeCommandListAppendSignalEvent", false, true},
    {"zeCommandListAppendWaitOnEvents", false, true},
    {"zeEventPoolCreate", false, false, false, live_pools},
    {"zeEventPoolDestroy"},
    {"zeEventCreate", false, false, false, live_events},
    {"zeEventDestroy"}, {"zeEventHostSignal"}, {"zeEventHostSynchronize"}, {"zeEventQueryStatus"},
    {"zeEventHostReset"},
    {"zesDeviceEnumMemoryModules"}, {"zesMemoryGetProperties"}, {"zesMemoryGetState"},
};

bool code_by_name(std::string_view name, int64_t* value) {
    for (const auto& r : kResults)
        if (name == r.name) {
            *value = static_cast<int64_t>(r.value);
            return true;
        }
    return false;
}

std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t\r");
    size_t e = s.find_last_not_of(" \t\r");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// Parses a whole unsigned decimal number.
bool parse_u64(const std::string& s, uint64_t& out) {
    if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos) return false;
    out = std::strtoull(s.c_str(), nullptr, 10);
    return true;
}

// Reads an unsigned environment value; false with a message when malformed.
bool env_u64(const char* name, uint64_t& out, bool allow_suffix, std::string& error) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return true;
    std::string s = trim(v);
    uint64_t mult = 1;
    if (allow_suffix && !s.empty()) {
        char c = static_cast<char>(std::toupper(static_cast<unsigned char>(s.back())));
        if (c == 'K') mult = uint64_t(1) << 10;
        if (c == 'M') mult = uint64_t(1) << 20;
        if (c == 'G') mult = uint64_t(1) << 30;
        if (mult != 1) s.pop_back();
    }
    uint64_t n = 0;
    if (!parse_u64(s, n) || n > (UINT64_MAX / mult)) {
        error = std::string(name) + "='" + v + "' is not a number";
        return false;
    }
    out = n * mult;
    return true;
}

}  // namespace

const xmc_faults::Dialect& fault_dialect() {
    static const xmc_faults::Dialect d = [] {
        xmc_faults::Dialect d;
        d.fake = "the fake Level Zero driver";
        d.entries.assign(std::begin(kEntries), std::end(kEntries));
        d.code_by_name = code_by_name;
        d.code_type = "ze_result_t";
        d.max_code = 0x7fffffff;  // ze_result_t's range (its largest is 0x7fffffff)
        d.nonidentity_offset = false;  // the alias is wherever the fake's mapping lands
        return d;
    }();
    return d;
}

const char* result_name(ze_result_t r) {
    for (const auto& n : kResults)
        if (n.value == r) return n.name;
    return "";
}

void configure_locked() {
    State& s = S();
    if (s.configured) return;
    s.configured = true;
    std::string error;
    uint64_t count = 2, memory = uint64_t(8) << 30;
    bool ok = env_u64("XMC_FAKE_ZE_DEVICES", count, false, error) &&
              env_u64("XMC_FAKE_ZE_DEVICE_MEMORY", memory, true, error);
    if (ok && (count < 1 || count > kMaxDevices)) {
        error = "XMC_FAKE_ZE_DEVICES must be 1.." + std::to_string(kMaxDevices);
        ok = false;
    }
    std::vector<uint32_t> order;
    if (ok) {
        const char* o = std::getenv("XMC_FAKE_ZE_ORDER");
        if (o != nullptr && *o != '\0') {
            std::string text(o);
            size_t pos = 0;
            while (ok && pos <= text.size()) {
                size_t end = text.find(',', pos);
                if (end == std::string::npos) end = text.size();
                uint64_t v = 0;
                if (!parse_u64(trim(text.substr(pos, end - pos)), v) || v >= count) {
                    ok = false;
                } else {
                    order.push_back(static_cast<uint32_t>(v));
                }
                pos = end + 1;
            }
            std::vector<uint32_t> sorted = order;
            std::sort(sorted.begin(), sorted.end());
            for (uint32_t i = 0; ok && i < count; ++i)
                if (sorted.size() != count || sorted[i] != i) ok = false;
            if (!ok)
                error = std::string("XMC_FAKE_ZE_ORDER='") + o +
                        "' is not a permutation of 0.." + std::to_string(count - 1);
        } else {
            for (uint32_t i = 0; i < count; ++i) order.push_back(i);
        }
    }
    if (ok) {
        const char* f = std::getenv("XMC_FAKE_ZE_FAULTS");
        std::string why;
        if (f != nullptr && !xmc_faults::parse(fault_dialect(), f, s.rules, why)) {
            error = "XMC_FAKE_ZE_FAULTS: " + why;
            s.rules.clear();
            ok = false;
        }
    }
    if (!ok) {
        std::fprintf(stderr, "xmc_fake_ze: %s; the fake driver will not initialise\n",
                     error.c_str());
        s.config_result = ZE_RESULT_ERROR_INVALID_ARGUMENT;
        return;
    }
    s.devices.resize(count);
    for (uint32_t i = 0; i < count; ++i) {
        s.devices[i].native = i;
        s.devices[i].total = memory;
    }
    s.order = order;
    for (uint32_t pos = 0; pos < count; ++pos) s.devices[order[pos]].position = pos;
}

FaultOutcome enter(const char* entry, const uint64_t* size) {
    FaultOutcome out;
    xmc_faults::Decision d;
    {
        State& s = S();
        std::lock_guard<std::mutex> lock(s.mu);
        configure_locked();
        ++s.calls[entry];
        d = xmc_faults::decide(s.rules, {entry, size != nullptr, size != nullptr ? *size : 0});
    }
    if (d.delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(d.delay_us));
    if (d.fail) out.result = static_cast<ze_result_t>(d.code);
    out.nonidentity = d.nonidentity;
    out.exec_delay_us = d.exec_delay_us;
    return out;
}

void note_device_fault(const std::string& message) {
    State& s = S();
    ++s.device_faults;
    s.fault_log.push_back(message);
    while (s.fault_log.size() > 16) s.fault_log.pop_front();
    std::fprintf(stderr, "xmc_fake_ze: device fault: %s\n", message.c_str());
}

}  // namespace xmc_fake_ze

// ---------------------------------------------------------------------------------
// Control API.
using namespace xmc_fake_ze;

namespace {
std::string g_fault_error_copy;  // returned by xmc_fake_ze_fault_error

const char* alloc_type_name(AllocType t) {
    switch (t) {
    case AllocType::Host: return "host allocation";
    case AllocType::Device: return "device allocation";
    case AllocType::Registration: return "registration";
    }
    return "?";
}

std::string hex(uintptr_t v) {
    char b[32];
    std::snprintf(b, sizeof b, "0x%" PRIxPTR, v);
    return b;
}

std::string native_list(const std::vector<uint32_t>& v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
    return out + "]";
}

size_t live_locked() {
    State& s = S();
    return s.contexts.size() + s.allocs.size() + s.reservations.size() + s.physmems.size() +
           s.mappings.size() + count_command_objects_locked();
}
}  // namespace

extern "C" ZE_DLLEXPORT int xmc_fake_ze_set_faults(const char* script) {
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    configure_locked();
    std::vector<xmc_faults::Rule> rules;
    std::string error;
    if (script != nullptr && !xmc_faults::parse(fault_dialect(), script, rules, error)) {
        s.fault_error = error;
        std::fprintf(stderr, "xmc_fake_ze: fault script rejected: %s\n", error.c_str());
        return -1;
    }
    s.rules = std::move(rules);
    s.fault_error.clear();
    return 0;
}

extern "C" ZE_DLLEXPORT const char* xmc_fake_ze_fault_error(void) {
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    g_fault_error_copy = s.fault_error;
    return g_fault_error_copy.c_str();
}

extern "C" ZE_DLLEXPORT size_t xmc_fake_ze_live_objects(void) {
    std::lock_guard<std::mutex> lock(S().mu);
    return live_locked();
}

extern "C" ZE_DLLEXPORT size_t xmc_fake_ze_ledger(char* buf, size_t cap) {
    State& s = S();
    std::string out;
    {
        std::lock_guard<std::mutex> lock(s.mu);
        out += "live objects: " + std::to_string(live_locked()) + "\n";
        for (const auto& [id, c] : s.contexts)
            out += "context " + std::to_string(id) + " devices=" + native_list(c.devices) +
                   " registrations-map-for=" + std::to_string(c.first) + "\n";
        for (const auto& [base, a] : s.allocs) {
            out += std::string(alloc_type_name(a.type)) + " " + hex(base) + " size=" +
                   std::to_string(a.size) + " context=" + std::to_string(a.ctx);
            if (a.type == AllocType::Device) out += " device=" + std::to_string(a.device);
            if (a.type == AllocType::Registration) {
                out += " mapped-for=" + native_list(a.mapped_for);
                if (a.system_memory != a.base) out += " non-identity-of=" + hex(a.system_memory);
            }
            out += "\n";
        }
        for (const auto& [base, r] : s.reservations)
            out += "reservation " + hex(base) + " size=" + std::to_string(r.size) +
                   " context=" + std::to_string(r.ctx) + "\n";
        for (const auto& [id, p] : s.physmems)
            out += "physical memory " + std::to_string(id) + " size=" + std::to_string(p.size) +
                   " device=" + std::to_string(p.device) + " mapped-pages=" +
                   std::to_string(p.mapped_pages) + "\n";
        for (const auto& [id, m] : s.mappings)
            out += "mapping " + hex(m.base) + " size=" + std::to_string(m.size) + " physical=" +
                   std::to_string(m.phys) + " pages-mapped=" + std::to_string(m.pages_left) + "\n";
        ledger_commands_locked(out);
        for (const auto& d : s.devices)
            out += "device " + std::to_string(d.native) + " position=" +
                   std::to_string(d.position) + " used=" + std::to_string(d.used) + " of " +
                   std::to_string(d.total) + "\n";
        out += "device faults: " + std::to_string(s.device_faults) + "\n";
        for (const auto& m : s.fault_log) out += "  fault: " + m + "\n";
    }
    if (buf != nullptr && cap > 0) {
        size_t n = std::min(cap - 1, out.size());
        std::memcpy(buf, out.data(), n);
        buf[n] = '\0';
    }
    return out.size();
}

extern "C" ZE_DLLEXPORT void xmc_fake_ze_reset(void) {
    State& s = S();
    std::vector<std::thread> threads;
    {
        std::lock_guard<std::mutex> lock(s.mu);
        stop_engines_locked(threads);
        s.cv.notify_all();
    }
    for (auto& t : threads)
        if (t.joinable()) t.join();
    std::lock_guard<std::mutex> lock(s.mu);
    release_commands_locked();
    release_memory_locked();
    s.rules.clear();
    s.fault_error.clear();
    s.calls.clear();
    s.device_faults = 0;
    s.fault_log.clear();
}

extern "C" ZE_DLLEXPORT uint64_t xmc_fake_ze_call_count(const char* entry) {
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    if (entry == nullptr) {
        uint64_t total = 0;
        for (const auto& [name, n] : s.calls) total += n;
        return total;
    }
    auto it = s.calls.find(entry);
    return it == s.calls.end() ? 0 : it->second;
}

extern "C" ZE_DLLEXPORT uint64_t xmc_fake_ze_device_faults(void) {
    std::lock_guard<std::mutex> lock(S().mu);
    return S().device_faults;
}

extern "C" ZE_DLLEXPORT int64_t xmc_fake_ze_device_free_memory(uint32_t native_index) {
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    if (native_index >= s.devices.size()) return -1;
    const Device& d = s.devices[native_index];
    return static_cast<int64_t>(d.total - d.used);
}
