// xmc-selftest: fails AFF-PATH
// xmc-selftest: base cuda
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug (AFF-PATH, on CUDA): each rank takes the data path its own caller asked for to every peer,
// as if every peer's caller had asked for the same, and the agreement does not compare the ranks'
// path tables. A rank told to stage then sends chunks to peers that pull from its buffer directly
// (or the reverse): targets are written, and the ranks fail late or hang, instead of all refusing
// before any write. Here the offers a rank gathers are read with its own forced path in every
// entry (the path step), and the digest its votes carry of its table is one every rank's has.
#include "cuda_broken.hpp"
#include "transfer_steps.hpp"

#include <vector>

namespace xmc::broken_cuda {
namespace {
std::string own_choice(const xmc_transfer_args &a, const std::vector<transfer::PathOffer> &offers, transfer::Work &w,
                       const std::string why_not[XMC_PATH_COUNT_], uint64_t *digest) {
    std::vector<transfer::PathOffer> as_mine = offers;
    for (transfer::PathOffer &o : as_mine) o.forced = offers[size_t(w.me)].forced;  // the bug: my caller's path
    const std::string why = broken_transfer::real().paths(a, as_mine, w, why_not, digest);
    *digest = 0;  // the bug: the tables are not compared
    return why;
}
} // namespace
void plant(xmc_backend &) { broken_transfer::steps().paths = own_choice; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_path_own_choice")
