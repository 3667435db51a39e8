// xmc-selftest: fails AFF-PREPARED-AGREE
// xmc-selftest: filter AFF-PREPARED-*
// xmc-selftest: timeout 60
// Bug: the run vote checks the run number but not which prepared transfer each rank runs, so
// ranks running two different prepared transfers of one group go ahead together. Here the run
// step compares generations only.
#include "broken.hpp"
#include "transfer_steps.hpp"

namespace xmc::broken {
namespace {
std::string generations_only(const std::vector<transfer::RunVote> &votes, int me) {
    std::vector<transfer::RunVote> same = votes;
    for (auto &v : same) v.id = votes[size_t(me)].id;
    return broken_transfer::real().run_agree(same, me);
}
} // namespace
void plant(xmc_backend &) { broken_transfer::steps().run_agree = generations_only; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_prepared_id_ignored")
