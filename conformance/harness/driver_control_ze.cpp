#include "driver_control_ze.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace xmc::conformance {

namespace {

// The devices the fake mapped the registration at `base` for, from its ledger
// line "registration 0x<base> size=<n> context=<id> mapped-for=[<native>,...]",
// and the UUID of the one device: the fake's device of native index i has the
// UUID "xmcfakeze", six zero bytes, i (fake_ze_control.h). Read from the
// driver's own records, never from the backend.
bool ze_registration_uuid(const DriverControl &c, const void *base, uint8_t uuid[16], std::string *why) {
    char key[64];
    std::snprintf(key, sizeof key, "registration 0x%llx ",
                  static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(base)));
    const std::string ledger = c.ledger_text();
    const size_t at = ledger.find(key);
    const size_t eol = at == std::string::npos ? at : ledger.find('\n', at);
    const size_t list = at == std::string::npos ? at : ledger.find(" mapped-for=[", at);
    if (list == std::string::npos || list > eol) {
        *why = std::string("the driver holds no registration at ") + key + "; ledger:\n" + ledger;
        return false;
    }
    const std::string devices = ledger.substr(list + 13, ledger.find(']', list) - (list + 13));
    if (devices.empty() || devices.find(',') != std::string::npos) {
        *why = "the driver maps the registration at " + std::string(key) + "for devices [" + devices +
               "], not for exactly one; ledger:\n" + ledger;
        return false;
    }
    std::memset(uuid, 0, 16);
    std::memcpy(uuid, "xmcfakeze", 9);
    uuid[15] = static_cast<uint8_t>(std::atoi(devices.c_str()));
    return true;
}

// ze_result_t values (ze_api.h), so the harness needs no Level Zero header.
constexpr int64_t ZE_DEVICE_LOST = 0x70000001;         // ZE_RESULT_ERROR_DEVICE_LOST
constexpr int64_t ZE_OUT_OF_HOST_MEMORY = 0x70000002;  // ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY

template <class F>
bool resolve(void *h, const char *name, F *out) {
    *out = reinterpret_cast<F>(dlsym(h, name));
    return *out != nullptr;
}

// xmc_fake_ze_call_record (fake_ze_control.h).
struct ZeCallRecord {
    char entry[48];
    int64_t tid;
};
size_t (*g_ze_records)(ZeCallRecord *out, size_t n) = nullptr;
void (*g_ze_reset_records)() = nullptr;
const char *(*g_ze_config_error)() = nullptr;

bool ze_calls(std::vector<DriverCall> *out, std::string *why) {
    std::vector<ZeCallRecord> recs(g_ze_records(nullptr, 0) + 16);
    const size_t seen = g_ze_records(recs.data(), recs.size());
    out->clear();
    for (size_t i = 0; i < seen && i < recs.size(); ++i) out->push_back(DriverCall{recs[i].entry, recs[i].tid, false});
    if (seen > out->size() || out->size() >= 65536) {  // XMC_FAKE_ZE_CALL_RECORDS
        *why = "the fake kept " + std::to_string(out->size()) + " of " + std::to_string(seen) + " call records";
        return false;
    }
    return true;
}

std::string ze_config_error() { return g_ze_config_error(); }

} // namespace

bool ze_backend(const std::string &name) { return name == "level_zero" || name.rfind("broken_ze_", 0) == 0; }

// The loader loads the driver named by ZE_ENABLE_ALT_DRIVERS; the fake Level
// Zero driver exports xmc_fake_ze_* next to its DDI tables.
bool ze_control(DriverControl *c, const std::string &name, std::string *why) {
    const char *env = std::getenv("ZE_ENABLE_ALT_DRIVERS");
    if (!env || !*env) {
        *why = "backend '" + name + "' runs on the system's Level Zero drivers "
               "(ZE_ENABLE_ALT_DRIVERS is not set), so no fault injection";
        return false;
    }
    c->library = env;
    // RTLD_NOLOAD: only the library the loader already loaded, never another.
    void *h = dlopen(c->library.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (!h) {
        *why = "backend '" + name + "' has no driver loaded from '" + c->library + "', so no fault injection";
        return false;
    }
    if (!resolve(h, "xmc_fake_ze_set_faults", &c->set_faults) ||
        !resolve(h, "xmc_fake_ze_live_objects", &c->live_objects) ||
        !resolve(h, "xmc_fake_ze_ledger", &c->ledger) || !resolve(h, "xmc_fake_ze_call_records", &g_ze_records) ||
        !resolve(h, "xmc_fake_ze_reset_call_records", &g_ze_reset_records) ||
        !resolve(h, "xmc_fake_ze_config_error", &g_ze_config_error)) {
        *why = "backend '" + name + "' runs on '" + c->library +
               "', a driver without the fake's fault injection";
        return false;
    }
    resolve(h, "xmc_fake_ze_second_releases", &c->second_releases);
    c->reclaimed_objects = nullptr;  // the Level Zero fake reclaims nothing behind the caller's back
    // zeMemAllocHost is the registration call; the backend makes no plain host allocations.
    c->reject_register = "fail:zeMemAllocHost:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY";
    c->reject_register_code = ZE_OUT_OF_HOST_MEMORY;
    c->register_entry = "zeMemAllocHost";
    c->delay_next_copy = "exec_delay:zeCommandListAppendMemoryCopy:150ms@1";
    c->reject_register_name = "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY";
    c->fail_next_unregister = "fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@1";
    c->fail_unregister_code = ZE_DEVICE_LOST;
    c->nonidentity_register = "nonidentity:zeMemAllocHost";
    c->unsupported_register = "fail:zeMemAllocHost:ZE_RESULT_ERROR_UNSUPPORTED_FEATURE";
    c->registration_uuid = ze_registration_uuid;
    c->calls = ze_calls;
    c->reset_calls = g_ze_reset_records;
    c->config_error = ze_config_error;
    return true;
}

} // namespace xmc::conformance
