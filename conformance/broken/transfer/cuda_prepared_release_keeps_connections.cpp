// xmc-selftest: fails AFF-PREPARED-RELEASE
// xmc-selftest: base cuda
// xmc-selftest: multirank 2
// xmc-selftest: env XMC_TRANSFER_PATH=ipc
// Bug (prepared transfers, on CUDA over path IPC): release forgets the handle and frees its
// record, but what the runs kept open (the peers' sources, mapped here) is never closed: each
// prepare and release holds on to the peers' memory until the process exits. No call fails; only
// the driver's ledger shows it. Here the release step lets go of the executor instead of
// destroying it.
#include "cuda_broken.hpp"
#include "transfer_steps.hpp"

namespace xmc::broken_cuda {
namespace {
bool release_but_keep(xmc_instance *inst, transfer::Prepared *p) {
    if (transfer::prepared_owner(p) != inst) return broken_transfer::real().release(inst, p);
    (void)p->ex.release();  // the bug: the executor, and the connections it holds, live on
    return broken_transfer::real().release(inst, p);
}
} // namespace
void plant(xmc_backend &) { broken_transfer::steps().release = release_but_keep; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_prepared_release_keeps_connections")
