// xmc-selftest: fails AFF-PREPARED-FOLLOW
// xmc-selftest: base cuda
// xmc-selftest: multirank 2
// xmc-selftest: env XMC_TRANSFER_PATH=ipc
// Bug (prepared transfers over path IPC, on CUDA): the reader opens its peer's source once and
// reads it on every run, and nothing makes it open again when the peer's slot was remapped. The
// real driver gives no error: an importer's mapping of a VMM handle keeps the old backing after
// the exporter releases and remaps (recorded on the H200), so every later run copies stale
// bytes. Here the step that says the source moved never says so.
#include "cuda_broken.hpp"
#include "transfer_steps.hpp"

namespace xmc::broken_cuda {
namespace {
bool never_moved(const be::MemoryStamp &, const be::MemoryStamp &) { return false; }
} // namespace
void plant(xmc_backend &) { broken_transfer::steps().source_moved = never_moved; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_ipc_prepared_mapping_cached")
