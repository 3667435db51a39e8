#include "errors.hpp"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <unordered_map>

namespace {
std::atomic<uint64_t> next_id{1};
// Thread-local so concurrent calls never see each other's errors; keyed by
// instance id (never reused) so a closed instance's slot cannot alias a new one.
thread_local std::unordered_map<uint64_t, xmc_error_info> slots;
} // namespace

xmc_instance::xmc_instance() : id(next_id.fetch_add(1)) {}
xmc_instance::~xmc_instance() = default;

namespace xmc::be {

xmc_status fail(xmc_instance *inst, xmc_status status, int64_t native_code, const char *call,
                const char *fmt, ...) {
    xmc_error_info info{};
    info.status = status;
    info.native_code = native_code;
    std::snprintf(info.call, sizeof info.call, "%s", call);
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(info.message, sizeof info.message, fmt, ap);
    va_end(ap);
    if (inst) slots[inst->id] = info;
    return status;
}

void last_error(xmc_instance *inst, xmc_error_info *out) {
    if (!out) return;
    *out = xmc_error_info{};
    if (!inst) return;
    auto it = slots.find(inst->id);
    if (it != slots.end()) *out = it->second;
}

const char *status_name(xmc_status s) { return xmc_status_string(s); }

} // namespace xmc::be
