#include "loader.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <cstring>
#include <algorithm>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>

namespace xmc::conformance {

static std::string exe_dir() {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return ".";
    buf[n] = 0;
    std::string p(buf);
    return p.substr(0, p.find_last_of('/'));
}

std::vector<std::string> backend_search_dirs() {
    std::vector<std::string> dirs;
    if (const char *env = std::getenv("XMC_BACKEND_PATH")) {
        std::string s(env);
        size_t start = 0;
        while (start <= s.size()) {
            size_t end = s.find(':', start);
            if (end == std::string::npos) end = s.size();
            if (end > start) dirs.push_back(s.substr(start, end - start));
            start = end + 1;
        }
    }
    const std::string d = exe_dir();
    dirs.push_back(d);
    dirs.push_back(d + "/../lib");
    dirs.push_back(d + "/../lib/xmc");
    return dirs;
}

static bool is_file(const std::string &p) { return access(p.c_str(), R_OK) == 0; }

// ABI version 1's table: a 32-byte header, then 42 entry points, transfer_execute last. An entry
// point inserted into the middle of the list in <xmc/backend.h> (instead of appended) would move
// the members after it, and every backend built before would be called at the wrong member.
static_assert(offsetof(xmc_backend, open) == 32 && offsetof(xmc_backend, transfer_execute) == 32 + 41 * sizeof(void *),
              "the entry points of ABI version 1 moved: append new ones at the end (<xmc/backend.h>)");

const LoadedBackend *load_backend(const std::string &spec, std::string *error) {
    static std::mutex mu;
    static std::map<std::string, std::unique_ptr<LoadedBackend>> cache;
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(spec); it != cache.end()) return it->second.get();

    std::string path;
    if (spec.find('/') != std::string::npos) {
        path = spec;  // a path: a vendor's library
    } else {
        for (const auto &d : backend_search_dirs()) {
            std::string p = d + "/libxmc_backend_" + spec + ".so";
            if (is_file(p)) { path = p; break; }
        }
        if (path.empty()) {
            if (error) *error = "no backend named '" + spec + "' in the search path (XMC_BACKEND_PATH, next to xmc, ../lib)";
            return nullptr;
        }
    }
    void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        if (error) *error = std::string("dlopen failed: ") + dlerror();
        return nullptr;
    }
    auto entry = reinterpret_cast<xmc_backend_entry_fn>(dlsym(h, XMC_BACKEND_ENTRY_SYMBOL));
    if (!entry) {
        if (error) *error = path + " does not export " XMC_BACKEND_ENTRY_SYMBOL;
        dlclose(h);
        return nullptr;
    }
    const xmc_backend *api = entry(XMC_ABI_VERSION);
    if (!api || api->abi_version != XMC_ABI_VERSION) {
        if (error) *error = path + ": backend does not speak ABI version " + std::to_string(XMC_ABI_VERSION);
        dlclose(h);
        return nullptr;
    }
    if (api->struct_size < offsetof(xmc_backend, pin_alloc) || !api->open || !api->close || !api->name) {
        if (error) *error = path + ": backend table lacks the mandatory entry points";
        dlclose(h);
        return nullptr;
    }
    auto lb = std::make_unique<LoadedBackend>();
    // An older backend filled fewer members (ABI: struct_size); the rest read as NULL, never as
    // whatever follows its table in memory.
    std::memcpy(&lb->table, api, std::min<size_t>(api->struct_size, sizeof lb->table));
    // Every entry point of a declared capability's group is there (the list in <xmc/backend.h>):
    // a NULL one would be called by the tests of a requirement the backend claims. Members past
    // the backend's struct_size (an older backend: groups appended since) are not its to fill;
    // they stay NULL and the tests that need them say so.
    std::string missing;
#define XMC_CHECK_ENTRY_(kind, ret, name, params)                                       \
    if (offsetof(xmc_backend, name) + sizeof lb->table.name <= api->struct_size && !lb->table.name) \
        missing += std::string(missing.empty() ? "" : ", ") + #name;
#define XMC_CHECK_GROUP_(group)                                                            \
    if ((lb->table.capabilities & (XMC_GROUP_CAPABILITY_##group)) == (XMC_GROUP_CAPABILITY_##group)) { \
        XMC_ENTRIES_##group(XMC_CHECK_ENTRY_)                                              \
    }
    XMC_ENTRY_GROUPS(XMC_CHECK_GROUP_)
#undef XMC_CHECK_GROUP_
#undef XMC_CHECK_ENTRY_
    if (!missing.empty()) {
        if (error) *error = path + ": backend " + api->name + " declares capabilities " + caps_to_string(api->capabilities) +
                            " but its table leaves NULL: " + missing;
        dlclose(h);
        return nullptr;
    }
    lb->spec = spec;
    lb->path = path;
    lb->api = &lb->table;
    lb->handle = h;  // kept open for the process's life: tables point into it
    return (cache[spec] = std::move(lb)).get();
}

const LoadedBackend *load_reference(std::string *where) {
    const std::string d = exe_dir();
    std::string looked;
    for (const std::string &dir : {d, d + "/../lib", d + "/../lib/xmc"}) {
        const std::string p = dir + "/libxmc_backend_host.so";
        looked += (looked.empty() ? "" : ", ") + p;
        if (!is_file(p)) continue;
        std::string error;
        if (const LoadedBackend *b = load_backend(p, &error)) return b;
        looked += " (" + error + ")";
    }
    if (where) *where = looked;
    return nullptr;
}

std::vector<std::string> discover_backends() {
    std::set<std::string> names;
    for (const auto &d : backend_search_dirs()) {
        DIR *dir = opendir(d.c_str());
        if (!dir) continue;
        while (dirent *e = readdir(dir)) {
            std::string n = e->d_name;
            const std::string pre = "libxmc_backend_", post = ".so";
            if (n.size() > pre.size() + post.size() && n.rfind(pre, 0) == 0 &&
                n.compare(n.size() - post.size(), post.size(), post) == 0)
                names.insert(n.substr(pre.size(), n.size() - pre.size() - post.size()));
        }
        closedir(dir);
    }
    return {names.begin(), names.end()};
}

std::string caps_to_string(xmc_caps caps) {
    std::string s;
    for (int i = 0; i < XMC_CAP_COUNT_; ++i) {
        xmc_caps c = 1ull << i;
        if (caps & c) s += (s.empty() ? "" : ",") + std::string(xmc_cap_string(c));
    }
    return s.empty() ? "none" : s;
}

} // namespace xmc::conformance
