// xmc-selftest: fails VMM-CALLBACK
// xmc-selftest: base cuda
// xmc-selftest: filter VMM-*
// xmc-selftest: timeout 60
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 240
// Bug (VMM-CALLBACK, on CUDA): after a release is queued, a host function on
// its stream asks the driver whether the stream has drained (cuStreamQuery),
// to note when the slot's memory went back. The call does not block, and the
// real driver lets cuStreamQuery through on its callback thread, so nothing
// is held and no request fails: only the fake's record of the calling thread
// of every driver call shows that slot work called the driver on a callback
// thread (the fake refuses the call, CUDA_ERROR_NOT_PERMITTED, which the
// bug ignores).
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {

static void query_stream(void *p) {
    auto *stream = static_cast<CUstream>(p);
    (void)xmc::cuda::Driver::get().cuStreamQuery(stream);  // the bug: a driver call in a callback
}

static xmc_status slot_release(xmc_instance *inst, xmc_slot *slot, xmc_stream *s, xmc_request **out) {
    const xmc_status st = reference()->slot_release(inst, slot, s, out);
    xmc::cuda::Stream found;
    if (st == XMC_OK && xmc::cuda::find_stream(inst, s, &found))
        reference()->host_callback(inst, s, query_stream, found.stream);
    return st;
}

void plant(xmc_backend &t) { t.slot_release = slot_release; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_vmm_query_in_callback")
