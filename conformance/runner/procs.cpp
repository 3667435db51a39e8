#include "procs.hpp"

#include "loader.hpp"
#include "transport_procs.hpp"
#include "transport_world.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <regex>

namespace xmc::conformance {

namespace {

// The seed this rank proposes; rank 0's wins (as under mpirun, multirank/main.cpp).
uint64_t proposed_seed() {
    const char *rc = std::getenv("RC_PARAMS");
    std::cmatch m;
    if (const char *s = std::getenv("XMC_SEED")) return std::strtoull(s, nullptr, 10);
    if (rc && std::regex_search(rc, m, std::regex("seed=([0-9]+)"))) return std::stoull(m[1].str());
    return (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
}

} // namespace

bool ProcsRank::join(int rank, int size, const std::string &store_dir, std::string *error) {
    std::string looked;
    for (const auto &d : backend_search_dirs()) {
        const std::string p = d + "/" XMC_PROCS_WORLD_LIBRARY;
        if (access(p.c_str(), F_OK) != 0) continue;
        module_ = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (module_) break;
        looked += std::string(looked.empty() ? "" : "; ") + dlerror();
    }
    if (!module_) {
        *error = "cannot load " XMC_PROCS_WORLD_LIBRARY " (built only where gloo is found), looked beside xmc, in ../lib "
                 "and ../lib/xmc" + (looked.empty() ? std::string() : ": " + looked);
        return false;
    }
    auto open = reinterpret_cast<decltype(&xmc_procs_world_open)>(dlsym(module_, XMC_PROCS_WORLD_ENTRY));
    if (!open) {
        *error = XMC_PROCS_WORLD_LIBRARY " does not export " XMC_PROCS_WORLD_ENTRY;
        return false;
    }
    seed_ = proposed_seed();
    char why[1024] = {};
    world_ = open(rank, size, store_dir.c_str(), &seed_, why, sizeof why);
    if (!world_) {
        *error = why;
        return false;
    }
    // RC_PARAMS with the shared seed in place of any other: rapidcheck reads it on first use.
    const char *rc = std::getenv("RC_PARAMS");
    std::string params = std::regex_replace(rc ? rc : "", std::regex("seed=[0-9]+"), "");
    params += " seed=" + std::to_string(seed_);
    setenv("RC_PARAMS", params.c_str(), 1);
    set_world(world_);
    return true;
}

void ProcsRank::leave() {
    if (world_) {
        set_world(nullptr);
        delete world_;
        world_ = nullptr;
    }
    // The module stays loaded: gloo's threads and static objects may outlive the world by a little.
}

} // namespace xmc::conformance
