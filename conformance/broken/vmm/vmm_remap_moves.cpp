// xmc-selftest: fails VMM-STABLE,VMM-UNMAPPED-FAULTS,VMM-REMAP-COPY,VMM-DEFERRED,VMM-STATE,VMM-BATCH,VMM-CLOSE,VMM-ADOPT,VMM-SERIAL,VMM-ASYNC-ERROR,VMM-CALLBACK,VMM-EVENT-WAIT,VMM-GRAPH,VMM-GRAPH-ORDER,VMM-DOUBLE,VMM-BATCH-PARTIAL,VMM-ERROR-CLEAR
// xmc-selftest: filter VMM-*
// xmc-selftest: timeout 60
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 180
// Bug: a remap maps the slot's fresh memory wherever the allocator
// puts it instead of at the slot's own address, so the address a captured
// graph holds points at a released range after the first release and remap.
// A slot that moves breaks every requirement whose test reads the slot at its
// address after a remap (only VMM-CREATE and VMM-RELEASE-ORDER never remap),
// graphs over it included; VMM-STABLE is the one that names it.
#include "broken.hpp"
#include "vmm_steps.hpp"

#include <sys/mman.h>

namespace xmc::broken {
using namespace xmc::host;
// A worker's remap maps the fresh memory as the reference does, then moves it wherever the
// kernel has room (mremap) and the slot takes that address; the old range is left reserved
// (PROT_NONE), as a release leaves it. slot_create's first mapping stays at the slot's address.
static int64_t map_anywhere(Vmm &v, Slot &s, bool worker) {
    const int64_t err = broken_vmm::real<Vmm>().map(v, s, worker);
    if (err || !worker) return err;
    void *at = reinterpret_cast<void *>(s.addr);
    void *to = mmap(nullptr, s.size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (to == MAP_FAILED || mremap(at, s.size, s.size, MREMAP_MAYMOVE | MREMAP_FIXED, to) == MAP_FAILED) return 0;
    mmap(at, s.size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    s.addr = reinterpret_cast<uintptr_t>(to);
    return 0;
}
void plant(xmc_backend &) { broken_vmm::host_steps().map = map_anywhere; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_remap_moves")
