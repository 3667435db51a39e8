// Broken CUDA backends for the self-test (SPEC 6): each is the reference CUDA
// backend with one real bug planted, run over the fake CUDA driver, so the
// suite must fail it on exactly the requirements that bug breaks.
// `XMC_BROKEN_CUDA_BACKEND(name)` defines the entry symbol; the file defines
// `void plant(xmc_backend &t)`, which overrides the entries that carry the bug.
// A registration bug replaces one step of the CUDA RegOps instead (register/reg_steps.hpp).
#pragma once
#include "cuda.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>

namespace xmc::broken_cuda {

void plant(xmc_backend &t);

// The correct table, for the entries a bug wraps.
inline const xmc_backend *reference() {
    static const xmc_backend t = [] { xmc_backend r{}; xmc::cuda::fill_table(r); return r; }();
    return &t;
}

// Puts `fn` in place of the driver's cuPointerGetAttribute, once, keeping the real one in *real:
// for the path IPC bugs that lie in how a source's memory is described to its readers.
using PointerAttribute = decltype(xmc::cuda::Driver::cuPointerGetAttribute);
inline void interpose_pointer_attribute(PointerAttribute fn, PointerAttribute *real) {
    static std::once_flag once;
    std::call_once(once, [&] {
        xmc::cuda::Driver &d = xmc::cuda::Driver::get();
        *real = d.cuPointerGetAttribute;
        d.cuPointerGetAttribute = fn;
    });
}

} // namespace xmc::broken_cuda

#define XMC_BROKEN_CUDA_BACKEND(NAME)                                                           \
    extern "C" XMC_EXPORT const xmc_backend *xmc_backend_entry(uint32_t v) {                   \
        if (v != XMC_ABI_VERSION) return nullptr;                                               \
        static const xmc_backend table = [] {                                                   \
            xmc_backend t{};                                                                    \
            xmc::cuda::fill_table(t);                                                           \
            t.name = NAME;                                                                      \
            xmc::broken_cuda::plant(t);                                                         \
            xmc::be::guard_table(t);  /* as the real backends: dead instances refused */        \
            return t;                                                                           \
        }();                                                                                    \
        return &table;                                                                          \
    }
