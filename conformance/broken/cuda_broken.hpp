// Broken CUDA backends for the self-test (SPEC 6): each is the reference CUDA
// backend with one real bug planted, run over the fake CUDA driver, so the
// suite must fail it on exactly the requirements that bug breaks.
// `XMC_BROKEN_CUDA_BACKEND(name)` defines the entry symbol; the file defines
// `void plant(xmc_backend &t)`, which overrides the entries that carry the bug.
// A registration bug replaces one step of the CUDA RegOps instead (register/reg_steps.hpp).
#pragma once
#include "cuda.hpp"
#include "broken_entry.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>

namespace xmc::broken_cuda {

void plant(xmc_backend &t);

// The correct table, for the entries a bug wraps.
inline const xmc_backend *reference() { return broken_entry::correct<xmc::cuda::fill_table>(); }

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

// The reference's transfer_execute (and transfer_prepare), after Swap replaced entries of this
// process's driver (or NCCL) table once: the bugs on the error paths between processes, which lie
// in what the reference's own calls are answered. plant(): t.transfer_execute =
// transfer_after_swap<swap> (and t.transfer_prepare = prepare_after_swap<swap>).
template <void (*Swap)()>
void swap_once() {
    static std::once_flag once;
    std::call_once(once, Swap);
}
template <void (*Swap)()>
xmc_status transfer_after_swap(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    swap_once<Swap>();
    return reference()->transfer_execute(inst, a, st);
}
template <void (*Swap)()>
xmc_status prepare_after_swap(xmc_instance *inst, const xmc_transfer_args *a, xmc_prepared **out) {
    swap_once<Swap>();
    return reference()->transfer_prepare(inst, a, out);
}

// The physical handles this process imported from its peers (cuMemImportFromShareableHandle),
// for the bugs on a reader's error paths: track() (from a Swap) puts the recording entry in place.
namespace imports {
inline std::mutex mu;
inline std::set<CUmemGenericAllocationHandle> handles;
inline decltype(xmc::cuda::Driver::cuMemImportFromShareableHandle) real = nullptr;
inline CUresult CUDAAPI recorded(CUmemGenericAllocationHandle *h, void *fd, CUmemAllocationHandleType type) {
    const CUresult r = real(h, fd, type);
    std::lock_guard<std::mutex> lock(mu);
    if (r == CUDA_SUCCESS) handles.insert(*h);
    return r;
}
inline bool has(CUmemGenericAllocationHandle h) {
    std::lock_guard<std::mutex> lock(mu);
    return handles.count(h) != 0;
}
inline void track() {
    xmc::cuda::Driver &d = xmc::cuda::Driver::get();
    real = d.cuMemImportFromShareableHandle;
    d.cuMemImportFromShareableHandle = recorded;
}
} // namespace imports

} // namespace xmc::broken_cuda

#define XMC_BROKEN_CUDA_BACKEND(NAME) XMC_BROKEN_ENTRY(NAME, xmc::cuda::fill_table, xmc::broken_cuda::plant)
