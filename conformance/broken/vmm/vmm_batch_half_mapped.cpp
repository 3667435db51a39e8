// xmc-selftest: fails VMM-BATCH-PARTIAL
// xmc-selftest: filter VMM-*
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 240
// Bug (VMM-BATCH-PARTIAL): a batch remap that fails at slot K leaves that slot half-mapped: fresh
// memory stays mapped (read-only, never granted write access) at its address although the request
// reports it rolled back and the slot answers as released; an access no longer faults.
#include "broken.hpp"
#include "vmm_track.hpp"

#include <sys/mman.h>
#include <unistd.h>

namespace xmc::broken {
namespace {
xmc_status map_half(xmc_instance *, const broken_vmm::Failed &f, xmc_status st) {
    if (!f.remap || f.slots.size() < 2 || f.index < 0 || f.index >= static_cast<long>(f.slots.size())) return st;
    const xmc_slot_info &s = f.slots[static_cast<size_t>(f.index)];
    const int fd = memfd_create("xmc-half-mapped", MFD_CLOEXEC);
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(s.size)) == 0)
        mmap(s.address, s.size, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
    if (fd >= 0) ::close(fd);
    return st;
}
} // namespace

void plant(xmc_backend &t) { broken_vmm::on_failed_wait(t, host(), map_half); }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_batch_half_mapped")
