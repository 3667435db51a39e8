#include "lifecycle.hpp"

#include "transfer_protocol.hpp"

#include "pin_registry.hpp"

#include <mutex>
#include <utility>
#include <vector>

namespace xmc::be {

xmc_status open_instance(const xmc_open_params *params, xmc_instance **out, const InstanceOps &ops) {
    if (!out) return XMC_ERR_INVALID_ARGUMENT;
    if (params && params->struct_size < offsetof(xmc_open_params, options) + sizeof params->options)
        return XMC_ERR_INVALID_ARGUMENT;
    const std::string opts = params && params->options ? params->options : "";
    std::vector<std::pair<std::string, std::string>> kvs;
    for (size_t at = 0; at < opts.size();) {
        size_t end = opts.find(';', at);
        if (end == std::string::npos) end = opts.size();
        const std::string kv = opts.substr(at, end - at);
        at = end + 1;
        if (kv.empty()) continue;
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) return XMC_ERR_INVALID_ARGUMENT;
        kvs.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    xmc_instance *in = ops.create();
    if (!in) return XMC_ERR_OUT_OF_MEMORY;
    for (const auto &[k, v] : kvs) {
        xmc_status st = XMC_ERR_INVALID_ARGUMENT;
        if (!ops.option(in, k, v, &st) || st != XMC_OK) {
            uint64_t slots = 0;
            ops.release_objects(in, &slots);
            ops.destroy(in);
            return XMC_ERR_INVALID_ARGUMENT;  // unknown key or bad value
        }
    }
    ops.count(+1);
    *out = in;
    return XMC_OK;
}

xmc_status close_instance(xmc_instance *inst, xmc_close_report *out, const InstanceOps &ops,
                          Registrations &registrations) {
    if (!inst) return XMC_ERR_INVALID_HANDLE;
    static std::mutex close_mu;
    std::lock_guard<std::mutex> closing(close_mu);
    xmc_close_report report{};
    // AFF-PREPARED-RELEASE: what the caller never released goes first, counted (a leak it shows).
    report.prepared_transfers = transfer::release_all_prepared(inst);
    if (xmc_status st = ops.release_objects(inst, &report.slots); st != XMC_OK) return st;
    const bool last = ops.count(0) == 1;
    // A driver refusal keeps the instance open, as above.
    if (last) {
        if (xmc_status st = registrations.release_all(inst, &report.registrations); st != XMC_OK) return st;
        if (xmc_status st = PinRegistry::process().release_all(inst, "close", &report.pinned_blocks,
                                                              &report.pinned_bytes);
            st != XMC_OK)
            return st;
    }
    ops.count(-1);
    // A context the driver refused to release stays held, and so does the instance: it counts
    // again, and closing again releases what is left.
    if (xmc_status st = ops.release_driver(inst); st != XMC_OK) {
        ops.count(+1);
        return st;
    }
    ops.destroy(inst);
    report.last_instance = last ? 1 : 0;
    if (out) *out = report;
    return XMC_OK;
}

} // namespace xmc::be
