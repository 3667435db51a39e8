// Loads a backend plugin by built-in name or by path (SPEC 3): dlopen, then the
// one entry symbol, then an ABI version check.
#pragma once
#include <xmc/backend.h>

#include <string>
#include <vector>

namespace xmc::conformance {

struct LoadedBackend {
    std::string spec;          // what the user named: "host" or a path
    std::string path;          // the library actually loaded
    const xmc_backend *api = nullptr;  // points at `table`
    xmc_backend table{};  // the backend's table; members beyond its struct_size are NULL
    void *handle = nullptr;

    bool has(xmc_caps cap) const { return api && (api->capabilities & cap) == cap; }
};

// Directories searched for libxmc_backend_<name>.so: $XMC_BACKEND_PATH (colon
// separated), then the running executable's directory, ../lib and ../lib/xmc.
std::vector<std::string> backend_search_dirs();

// Loads (once per process; later calls return the cached table). On failure
// returns nullptr and says why in *error.
const LoadedBackend *load_backend(const std::string &name_or_path, std::string *error);

// The suite's own host reference (libxmc_backend_host.so), which a failing
// stateful sequence is replayed on (SPEC 6): looked for where the runner
// itself is installed or built (the executable's directory, ../lib,
// ../lib/xmc), never on $XMC_BACKEND_PATH, so another library named "host"
// cannot stand in for it. nullptr when it is not there, with the places
// looked in (and why a library found there did not load) in *where.
const LoadedBackend *load_reference(std::string *where);

// Every libxmc_backend_*.so in the search directories.
std::vector<std::string> discover_backends();

// Comma-separated capability names of a set.
std::string caps_to_string(xmc_caps caps);

} // namespace xmc::conformance
