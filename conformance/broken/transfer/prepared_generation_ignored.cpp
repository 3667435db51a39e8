// xmc-selftest: fails AFF-PREPARED-AGREE
// xmc-selftest: filter AFF-PREPARED-*
// xmc-selftest: timeout 60
// Bug: the run vote checks that every rank runs the same prepared transfer but not the same run
// of it, so a rank whose earlier run never reached its peers pairs its next run with their
// earlier one. Here the run step compares ids only.
#include "broken.hpp"
#include "transfer_steps.hpp"

namespace xmc::broken {
namespace {
std::string ids_only(const std::vector<transfer::RunVote> &votes, int me) {
    std::vector<transfer::RunVote> same = votes;
    for (auto &v : same) v.generation = votes[size_t(me)].generation;
    return broken_transfer::real().run_agree(same, me);
}
} // namespace
void plant(xmc_backend &) { broken_transfer::steps().run_agree = ids_only; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_prepared_generation_ignored")
