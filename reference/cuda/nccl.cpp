// Loading NCCL (nccl.hpp): dlopen of XMC_NCCL_LIBRARY (default libnccl.so.2), dlsym of each entry.
// The real NCCL drives the CUDA driver libcuda.so.1 itself; with the backend on another driver
// (XMC_CUDA_DRIVER naming the fake), the default NCCL would move memory of a driver it does not
// see, so it is not loaded then and the NCCL path is unsupported unless XMC_NCCL_LIBRARY names one.
#include "nccl.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>
#include <cstring>
#include <mutex>

namespace xmc::cuda {

namespace {

void load(Nccl &n) {
    const char *env = std::getenv("XMC_NCCL_LIBRARY");
    const char *driver = std::getenv("XMC_CUDA_DRIVER");
    if (!(env && *env) && driver && *driver && std::strcmp(driver, "libcuda.so.1") != 0) {
        n.library = "libnccl.so.2";
        n.why = std::string("the CUDA driver is ") + driver +
                ", and the default NCCL (libnccl.so.2) drives libcuda.so.1; XMC_NCCL_LIBRARY names an NCCL for it";
        return;
    }
    n.library = env && *env ? env : "libnccl.so.2";
    // Kept loaded for the process's life: communicators and their threads live in it.
    void *lib = dlopen(n.library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *err = dlerror();
        n.why = "no NCCL: dlopen(" + n.library + ") failed: " + (err ? err : "unknown error");
        return;
    }
    std::string missing;
    auto one = [&](const char *symbol, auto *out, bool required) {
        *out = reinterpret_cast<std::remove_reference_t<decltype(*out)>>(dlsym(lib, symbol));
        if (!*out && required && missing.empty()) missing = symbol;
    };
#define XMC_NCCL_ONE(name) one(#name, &n.name, true);
#define XMC_NCCL_OPT(name) one(#name, &n.name, false);
    XMC_NCCL_ENTRIES(XMC_NCCL_ONE)
    XMC_NCCL_OPTIONAL(XMC_NCCL_OPT)
#undef XMC_NCCL_ONE
#undef XMC_NCCL_OPT
    if (!missing.empty()) {
        n.why = n.library + " does not export " + missing + ", which the NCCL path needs";
        return;
    }
    if (ncclResult_t r = n.ncclGetVersion(&n.version); r != ncclSuccess) {
        n.why = n.library + ": ncclGetVersion failed with " + n.text(r) + " (" + std::to_string(int(r)) + ")";
        return;
    }
    n.usable = true;
}

} // namespace

Nccl &Nccl::get() {
    static Nccl n;
    static std::once_flag once;
    std::call_once(once, [] { load(n); });
    return n;
}

const char *Nccl::text(ncclResult_t r) const {
    const char *s = ncclGetErrorString ? ncclGetErrorString(r) : nullptr;
    return s ? s : "ncclResult_t";
}

} // namespace xmc::cuda
