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
#include <unistd.h>

#include <cerrno>

namespace xmc::broken {
using namespace xmc::host;
// A worker's remap maps the memfd wherever mmap puts it (no MAP_FIXED) and the
// slot takes that address; slot_create's first mapping is still at the slot's.
static int map_anywhere(Vmm &v, Slot &s, bool counted) {
    if (!counted) return host::map_backing(v, s, counted);
    if (!take_device_memory(s.size)) return ENOMEM;
    const int fd = memfd_create("xmc-slot", MFD_CLOEXEC);
    int err = fd < 0 ? errno : 0;
    if (!err && ftruncate(fd, static_cast<off_t>(s.size)) != 0) err = errno;
    if (!err && ++v.maps == v.fail_map) err = ENOMEM;  // the test-only fault injection, as the reference
    void *p = err ? MAP_FAILED : mmap(nullptr, s.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (!err && p == MAP_FAILED) err = errno;
    if (err) {
        if (fd >= 0) ::close(fd);
        give_device_memory(s.size);
        return err;
    }
    s.addr = reinterpret_cast<uintptr_t>(p);
    s.fd = fd;
    return 0;
}
void plant(xmc_backend &) { vmm_steps().map_backing = map_anywhere; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_remap_moves")
