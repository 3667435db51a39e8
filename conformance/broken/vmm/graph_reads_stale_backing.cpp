// xmc-selftest: fails VMM-GRAPH
// xmc-selftest: filter VMM-*
// xmc-selftest: timeout 60
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 240
// xmc-selftest: quick
// Bug (VMM-GRAPH): a capture resolves a copy's slot address to the physical
// memory mapped there at capture time (here: a second mapping of the slot's
// memfd), as a graph implementation that bakes physical pages into its nodes
// does. The graph works until the slot's first release: from then on it keeps
// reading and writing the old backing (kept alive by its mapping) instead of
// the reloaded one, and never faults, so only the contents give it away.
#include "broken.hpp"
#include "vmm.hpp"
#include "vmm_track.hpp"

#include <sys/mman.h>

#include <map>
#include <mutex>
#include <vector>

namespace xmc::broken {
using namespace xmc::host;
namespace {

std::mutex mu;
std::map<xmc_instance *, std::vector<std::pair<void *, size_t>>> aliases;  // unmapped at close

// The address `p` resolves to now if it lies in a slot: the same offset in a
// fresh mapping of the slot's memfd; else p.
void *resolve_now(xmc_instance *inst, void *p) {
    Vmm &v = *static_cast<Instance *>(inst)->vmm;
    const auto a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lock(v.mu);
    for (const auto &[h, s] : v.slots) {
        if (a < s->addr || a >= s->addr + s->size || s->fd < 0) continue;
        void *alias = mmap(nullptr, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
        if (alias == MAP_FAILED) return p;
        aliases[inst].emplace_back(alias, s->size);
        return static_cast<char *>(alias) + (a - s->addr);
    }
    return p;
}

xmc_status copy(xmc_instance *inst, const xmc_copy_desc *desc, xmc_stream *s) {
    if (!broken_vmm::is_capturing(inst, s) || !desc) return host()->copy(inst, desc, s);
    xmc_copy_desc d = *desc;
    {
        std::lock_guard<std::mutex> lock(mu);
        d.src.ptr = resolve_now(inst, d.src.ptr);  // the bug: the backing, not the address
        d.dst.ptr = resolve_now(inst, d.dst.ptr);
    }
    return host()->copy(inst, &d, s);
}

xmc_status close(xmc_instance *inst) {
    const xmc_status st = host()->close(inst);
    broken_vmm::forget_captures(inst);
    std::lock_guard<std::mutex> lock(mu);
    for (auto &[p, n] : aliases[inst]) munmap(p, n);
    aliases.erase(inst);
    return st;
}

} // namespace

void plant(xmc_backend &t) {
    broken_vmm::track_captures(t, host());
    t.copy = copy;
    t.close = close;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_graph_reads_stale_backing")
