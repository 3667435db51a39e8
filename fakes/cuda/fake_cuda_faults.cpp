// Fault scripts (grammar in fake_cuda_control.h), the table of exported entry
// points (for cuGetProcAddress and for checking the entry names a script
// uses), and CUresult names.
#include <cstdio>
#include <cstring>

#include "fake_cuda_internal.h"

namespace xmc_fake {

// ---- CUresult names -----------------------------------------------------------

namespace {
struct ResultInfo {
    CUresult code;
    const char* name;
    const char* text;
};
const ResultInfo kResults[] = {
#define XMC_CU_RESULT(name, text) {name, #name, text},
#include "fake_cuda_results.inc"
#undef XMC_CU_RESULT
};
}  // namespace

const char* result_name(CUresult r) {
    for (const ResultInfo& i : kResults)
        if (i.code == r) return i.name;
    return nullptr;
}

const char* result_string(CUresult r) {
    for (const ResultInfo& i : kResults)
        if (i.code == r) return i.text;
    return nullptr;
}

bool result_from_name(std::string_view name, CUresult* out) {
    for (const ResultInfo& i : kResults)
        if (name == i.name) {
            *out = i.code;
            return true;
        }
    return false;
}

// ---- entry points -------------------------------------------------------------------

#define XMC_FAKE_STR2(x) #x
#define XMC_FAKE_STR(x) XMC_FAKE_STR2(x)
// name: the cuda.h name. The symbol and the address go through cuda.h's
// version macros (cuMemAlloc -> cuMemAlloc_v2), so they are what a program
// compiled against cuda.h calls.
#define XMC_FAKE_ENTRY(name) {#name, XMC_FAKE_STR(name), reinterpret_cast<void*>(&name), 0},

const std::vector<EntryPoint>& entry_points() {
    static const std::vector<EntryPoint> k = {
        // device and context (fake_cuda_device.cpp)
        XMC_FAKE_ENTRY(cuInit) XMC_FAKE_ENTRY(cuDriverGetVersion) XMC_FAKE_ENTRY(cuGetErrorName)
        XMC_FAKE_ENTRY(cuGetErrorString) XMC_FAKE_ENTRY(cuGetProcAddress) XMC_FAKE_ENTRY(cuDeviceGetCount)
        XMC_FAKE_ENTRY(cuDeviceGet) XMC_FAKE_ENTRY(cuDeviceGetName)
        {"cuDeviceGetUuid", "cuDeviceGetUuid", reinterpret_cast<void*>(&xmc_fake_cuDeviceGetUuid_v1), 0},
        {"cuDeviceGetUuid", "cuDeviceGetUuid_v2", reinterpret_cast<void*>(&cuDeviceGetUuid_v2), 11040},
        XMC_FAKE_ENTRY(cuDeviceTotalMem) XMC_FAKE_ENTRY(cuDeviceGetAttribute) XMC_FAKE_ENTRY(cuDeviceGetPCIBusId)
        XMC_FAKE_ENTRY(cuDeviceCanAccessPeer) XMC_FAKE_ENTRY(cuDevicePrimaryCtxRetain)
        XMC_FAKE_ENTRY(cuDevicePrimaryCtxRelease) XMC_FAKE_ENTRY(cuDevicePrimaryCtxGetState)
        {"cuCtxCreate", "cuCtxCreate_v2", reinterpret_cast<void*>(&cuCtxCreate_v2), 0},
        {"cuCtxCreate", "cuCtxCreate_v4", reinterpret_cast<void*>(&cuCtxCreate_v4), 12050},
        XMC_FAKE_ENTRY(cuCtxDestroy) XMC_FAKE_ENTRY(cuCtxSetCurrent) XMC_FAKE_ENTRY(cuCtxGetCurrent)
        XMC_FAKE_ENTRY(cuCtxGetDevice) XMC_FAKE_ENTRY(cuCtxPushCurrent) XMC_FAKE_ENTRY(cuCtxPopCurrent)
        XMC_FAKE_ENTRY(cuCtxSynchronize) XMC_FAKE_ENTRY(cuCtxEnablePeerAccess)
        XMC_FAKE_ENTRY(cuCtxDisablePeerAccess)
        // memory and registration (fake_cuda_memory.cpp)
        XMC_FAKE_ENTRY(cuMemAlloc) XMC_FAKE_ENTRY(cuMemFree) XMC_FAKE_ENTRY(cuMemGetInfo)
        XMC_FAKE_ENTRY(cuMemHostRegister) XMC_FAKE_ENTRY(cuMemHostUnregister)
        XMC_FAKE_ENTRY(cuMemHostGetDevicePointer) XMC_FAKE_ENTRY(cuMemHostGetFlags)
        XMC_FAKE_ENTRY(cuPointerGetAttribute)
        // streams, events, copies (fake_cuda_stream.cpp)
        XMC_FAKE_ENTRY(cuStreamCreate) XMC_FAKE_ENTRY(cuStreamDestroy) XMC_FAKE_ENTRY(cuStreamSynchronize)
        XMC_FAKE_ENTRY(cuStreamQuery) XMC_FAKE_ENTRY(cuStreamWaitEvent) XMC_FAKE_ENTRY(cuEventCreate)
        XMC_FAKE_ENTRY(cuEventRecord) XMC_FAKE_ENTRY(cuEventQuery) XMC_FAKE_ENTRY(cuEventSynchronize)
        XMC_FAKE_ENTRY(cuEventDestroy)
        {"cuEventElapsedTime", "cuEventElapsedTime", reinterpret_cast<void*>(&xmc_fake_cuEventElapsedTime_v1), 0},
        {"cuEventElapsedTime", "cuEventElapsedTime_v2", reinterpret_cast<void*>(&cuEventElapsedTime_v2), 12080},
        XMC_FAKE_ENTRY(cuLaunchHostFunc) XMC_FAKE_ENTRY(cuMemcpyAsync) XMC_FAKE_ENTRY(cuMemcpyHtoDAsync)
        XMC_FAKE_ENTRY(cuMemcpyDtoHAsync) XMC_FAKE_ENTRY(cuMemcpyDtoDAsync) XMC_FAKE_ENTRY(cuMemcpy2DAsync)
        XMC_FAKE_ENTRY(cuMemcpy3DAsync) XMC_FAKE_ENTRY(cuMemcpyPeerAsync) XMC_FAKE_ENTRY(cuMemsetD8Async)
        XMC_FAKE_ENTRY(cuMemcpy3DPeerAsync)  // fake_cuda_peer.cpp
        XMC_FAKE_ENTRY(cuMemcpy) XMC_FAKE_ENTRY(cuMemcpyHtoD) XMC_FAKE_ENTRY(cuMemcpyDtoH)
        XMC_FAKE_ENTRY(cuMemcpyDtoD) XMC_FAKE_ENTRY(cuMemsetD8)
        // stream memory operations (fake_cuda_stream.cpp): the CUDA 12 _v2 symbols
        {"cuStreamWaitValue32", "cuStreamWaitValue32_v2", reinterpret_cast<void*>(&cuStreamWaitValue32_v2), 11070},
        {"cuStreamWriteValue32", "cuStreamWriteValue32_v2", reinterpret_cast<void*>(&cuStreamWriteValue32_v2), 11070},
        // virtual memory management (fake_cuda_vmm.cpp)
        XMC_FAKE_ENTRY(cuMemGetAllocationGranularity) XMC_FAKE_ENTRY(cuMemAddressReserve)
        XMC_FAKE_ENTRY(cuMemAddressFree) XMC_FAKE_ENTRY(cuMemCreate) XMC_FAKE_ENTRY(cuMemRelease)
        XMC_FAKE_ENTRY(cuMemMap) XMC_FAKE_ENTRY(cuMemUnmap) XMC_FAKE_ENTRY(cuMemSetAccess)
        XMC_FAKE_ENTRY(cuMemGetAccess)
    };
    return k;
}

std::string_view base_name(std::string_view name) {
    // strip "_v<digits>"
    size_t u = name.rfind("_v");
    if (u == std::string_view::npos || u + 2 >= name.size()) return name;
    for (size_t i = u + 2; i < name.size(); ++i)
        if (name[i] < '0' || name[i] > '9') return name;
    return name.substr(0, u);
}

bool known_entry(std::string_view base) {
    for (const EntryPoint& e : entry_points())
        if (base == e.base) return true;
    return false;
}

// ---- fault scripts ------------------------------------------------------------------------

namespace {

constexpr size_t kMaxScript = 64 * 1024;
constexpr size_t kMaxRules = 256;

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    return s;
}

// Unsigned decimal, or hex with 0x when allow_hex; false on anything else or
// when the value exceeds max.
bool parse_number(std::string_view s, uint64_t max, bool allow_hex, uint64_t* out) {
    if (s.empty()) return false;
    int base = 10;
    if (allow_hex && s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s.remove_prefix(2);
    }
    uint64_t v = 0;
    for (char c : s) {
        int d = -1;
        if (c >= '0' && c <= '9') d = c - '0';
        if (base == 16 && c >= 'a' && c <= 'f') d = c - 'a' + 10;
        if (base == 16 && c >= 'A' && c <= 'F') d = c - 'A' + 10;
        if (d < 0) return false;
        if (v > (max - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) return false;
        v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
    }
    *out = v;
    return true;
}

bool valid_identifier(std::string_view s) {
    if (s.empty() || s.size() > 64) return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
            return false;
    return true;
}

// A short, printable copy of (part of) a rule for messages.
std::string quote(std::string_view s) {
    std::string q;
    for (char c : s.substr(0, 80)) q.push_back(static_cast<unsigned char>(c) < 0x20 ? '?' : c);
    if (s.size() > 80) q += "...";
    return "'" + q + "'";
}

bool parse_rule(std::string_view text, FaultRule& r, std::string& why) {
    r.text = std::string(text);
    size_t c1 = text.find(':');
    size_t c2 = c1 == std::string_view::npos ? c1 : text.find(':', c1 + 1);
    if (c2 == std::string_view::npos) {
        why = "expected ACTION:ENTRY:ARG[@K[+]]";
        return false;
    }
    std::string_view action = trim(text.substr(0, c1));
    std::string_view entry = trim(text.substr(c1 + 1, c2 - c1 - 1));
    std::string_view rest = text.substr(c2 + 1);
    std::string_view arg = rest, when;
    size_t at = rest.find('@');
    if (at != std::string_view::npos) {
        arg = rest.substr(0, at);
        when = trim(rest.substr(at + 1));
        if (when.empty()) {
            why = "'@' needs a call number K or K+";
            return false;
        }
    }
    arg = trim(arg);

    if (action == "fail") r.action = FaultRule::Action::fail;
    else if (action == "delay") r.action = FaultRule::Action::delay;
    else if (action == "nonidentity") r.action = FaultRule::Action::nonidentity;
    else {
        why = "unknown action " + quote(action) + " (fail, delay or nonidentity)";
        return false;
    }

    if (entry == "*") {
        if (r.action == FaultRule::Action::nonidentity) {
            why = "nonidentity applies to cuMemHostRegister only, not '*'";
            return false;
        }
        r.entry = "*";
    } else {
        if (!valid_identifier(entry)) {
            why = "bad entry point name " + quote(entry);
            return false;
        }
        std::string_view b = base_name(entry);
        if (!known_entry(b)) {
            why = "unknown entry point " + quote(entry) + " (the fake does not export it)";
            return false;
        }
        r.entry = std::string(b);
        if (r.action == FaultRule::Action::nonidentity && r.entry != "cuMemHostRegister") {
            why = "nonidentity applies to cuMemHostRegister only, not " + quote(entry);
            return false;
        }
    }

    if (arg.empty()) {
        why = r.action == FaultRule::Action::fail    ? "fail needs a CUresult (name or number)"
              : r.action == FaultRule::Action::delay ? "delay needs microseconds"
                                                     : "nonidentity needs a byte offset";
        return false;
    }
    uint64_t n = 0;
    switch (r.action) {
        case FaultRule::Action::fail: {
            CUresult code = CUDA_SUCCESS;
            if (result_from_name(arg, &code)) {
                r.arg = code;
            } else if (parse_number(arg, 1023, false, &n)) {  // CUresult's range: no code above 999
                r.arg = static_cast<int64_t>(n);
            } else {
                why = "unknown CUresult " + quote(arg) + " (a CUDA_ERROR_* name or a number 1..1023)";
                return false;
            }
            if (r.arg == CUDA_SUCCESS) {
                why = "CUDA_SUCCESS is not a failure";
                return false;
            }
            break;
        }
        case FaultRule::Action::delay:
            if (!parse_number(arg, 60000000, false, &n)) {
                why = "bad delay " + quote(arg) + " (microseconds, 0..60000000)";
                return false;
            }
            r.arg = static_cast<int64_t>(n);
            break;
        case FaultRule::Action::nonidentity:
            if (!parse_number(arg, (1ull << 40) - 1, true, &n) || n == 0) {
                why = "bad offset " + quote(arg) + " (non-zero, below 2^40, decimal or 0x hex)";
                return false;
            }
            r.arg = static_cast<int64_t>(n);
            break;
    }

    if (!when.empty()) {
        if (when.back() == '+') {
            r.and_later = true;
            when.remove_suffix(1);
        }
        if (!parse_number(trim(when), 1ull << 40, false, &n) || n == 0) {
            why = "bad call number " + quote(when) + " (K >= 1, or K+)";
            return false;
        }
        r.k = n;
    }
    return true;
}

}  // namespace

bool parse_fault_script(std::string_view script, std::vector<FaultRule>& out, std::string& error) {
    out.clear();
    if (script.size() > kMaxScript) {
        error = "fault script longer than " + std::to_string(kMaxScript) + " bytes";
        return false;
    }
    if (script.find('\0') != std::string_view::npos) {
        error = "fault script holds a NUL byte";
        return false;
    }
    std::vector<FaultRule> rules;
    size_t index = 0;
    size_t pos = 0;
    while (pos <= script.size()) {
        // one line; '#' starts a comment
        size_t nl = script.find('\n', pos);
        std::string_view line = script.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
        pos = nl == std::string_view::npos ? script.size() + 1 : nl + 1;
        size_t hash = line.find('#');
        if (hash != std::string_view::npos) line = line.substr(0, hash);
        size_t start = 0;
        while (start <= line.size()) {
            size_t semi = line.find(';', start);
            std::string_view text =
                trim(line.substr(start, semi == std::string_view::npos ? std::string_view::npos : semi - start));
            start = semi == std::string_view::npos ? line.size() + 1 : semi + 1;
            if (text.empty()) continue;
            ++index;
            if (rules.size() >= kMaxRules) {
                error = "fault script has more than " + std::to_string(kMaxRules) + " rules";
                return false;
            }
            FaultRule r;
            std::string why;
            if (!parse_rule(text, r, why)) {
                error = "rule " + std::to_string(index) + " " + quote(text) + ": " + why;
                return false;
            }
            rules.push_back(std::move(r));
        }
    }
    out = std::move(rules);
    return true;
}

FaultDecision decide_faults_locked(State& g, std::string_view base) {
    FaultDecision d;
    bool nonidentity_done = false;
    for (FaultRule& r : g.rules) {
        if (r.entry != "*" && r.entry != base) continue;
        ++r.seen;
        bool fires = r.k == 0 || r.seen == r.k || (r.and_later && r.seen >= r.k);
        if (!fires) continue;
        switch (r.action) {
            case FaultRule::Action::fail:
                if (d.fail == CUDA_SUCCESS) d.fail = static_cast<CUresult>(r.arg);
                break;
            case FaultRule::Action::delay:
                d.delay_us += static_cast<uint64_t>(r.arg);
                break;
            case FaultRule::Action::nonidentity:
                if (!nonidentity_done) d.nonidentity = static_cast<uint64_t>(r.arg);
                nonidentity_done = true;
                break;
        }
    }
    return d;
}

}  // namespace xmc_fake
