// xmc-selftest: fails XXX-NEW-ID
// xmc-selftest: filter XXX-*
// xmc-selftest: timeout 60
// Bug: WHAT THE BACKEND DOES WRONG, in one paragraph, and which check of XXX-NEW-ID sees it: a
// reader learns from it alone why the suite must fail exactly these requirements.
//
// TEMPLATE: copy to conformance/broken/<primitive>/BUG.cpp (pin/, register/, vmm/, copy/, graph/,
// transfer/); delete the TEMPLATE comments. BUG, the file's name, is unique across the folders:
// it names the library (xmc_backend_broken_BUG), the test (selftest.BUG) and the backend
// ("broken_BUG", last line). No list to edit: conformance/broken/CMakeLists.txt globs the folders.
// TEMPLATE: the declarations are the file's first lines, each exactly "// xmc-selftest: KEY VALUE"
// with nothing after the value (it is read to the end of the line). The keys, documented at the top
// of conformance/broken/CMakeLists.txt: fails ID[,ID...] (required; "none" for a control),
// may-fail ID[,ID...]: WHY, base host|cuda|level_zero (default host), filter GLOB (default: the
// first ID's group), timeout S, env NAME=VALUE, ctest-timeout S, fake-nccl, needs-mlock,
// sanitize thread, quick, multirank N[,N...].
//
// The bug is one step of the reference's ops table replaced (SPEC 2 (0.3)): the rest stays the
// reference's, so the broken backend cannot drift from it. Here, a step of the host's RegOps
// (reference/common/registration.hpp; the helpers: conformance/broken/register/reg_steps.hpp).
#include "broken.hpp"     // TEMPLATE: base cuda: "cuda_broken.hpp"; base level_zero: "ze_broken.hpp"
#include "reg_steps.hpp"  // on the include path of files in register/ (a file's own folder is)

namespace xmc::broken {  // TEMPLATE: base cuda: xmc::broken_cuda; base level_zero: xmc::broken_ze
// TEMPLATE: the RegOps member it replaces, with its signature. It calls the reference's own step,
// kept in broken_reg::real(), except where the bug is; `call` says where the step runs from
// (reg_register, reg_unregister, close, pin_alloc, pin_free).
static int64_t release(const char *call, void *ctx, void *base, void *chunk, size_t bytes) {
    if (broken_reg::is(call, "reg_unregister")) return 0;  // the bug: TEMPLATE, IN A FEW WORDS
    return broken_reg::real().release(call, ctx, base, chunk, bytes);
}
// Runs once, when the table is made, before the first open.
// TEMPLATE: base cuda: xmc::cuda::registrations(); base level_zero: xmc::ze::registrations().
void plant(xmc_backend &) { broken_reg::steps(xmc::host::registrations()).release = release; }
// TEMPLATE: the other tables' steps, replaced the same way:
//   be::PinRegistry::process().lock_steps = {Steps::lock, Steps::unlock};   #include "skip_lock.hpp" (pin/racy_pin_free_unlocked.cpp)
//   broken_vmm::host_steps().map = map_anywhere;   #include "vmm_steps.hpp" (vmm/vmm_remap_moves.cpp)
// TEMPLATE: a primitive with no ops table yet (copy, graph, transfer, pinning's driver part), or
// the CUDA and Level Zero slots (their VmmOps types are private to their vmm.cpp), still wraps an
// ABI entry: plant(xmc_backend &t) { t.ENTRY = buggy_entry; },
// calling host()->ENTRY (broken.hpp) or reference()->ENTRY (cuda_broken.hpp, ze_broken.hpp).
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_BUG")  // TEMPLATE: base cuda: XMC_BROKEN_CUDA_BACKEND; level_zero: XMC_BROKEN_ZE_BACKEND
