// `xmc qualify --procs N`: the transfer requirements' tests also in a world of N processes on this
// host (SPEC 6, SPEC 8), where paths between processes run (CUDA IPC; NCCL where it is loaded) that
// a world of threads never reaches. qualify forks N children `xmc run --xmc-rank K --xmc-ranks N
// --xmc-store DIR`; each is one rank of the world, joined by gloo over TCP loopback through a
// FileStore in DIR, a fresh temporary folder (harness/transport_procs.hpp). docs/qualify.md.
#pragma once
#include <cstdint>
#include <string>

namespace xmc::conformance {

class World;

// This process as one rank: loads libxmc_procs_world.so, joins the world, takes rank 0's seed
// (XMC_SEED, a seed=... in RC_PARAMS, or a random one) into RC_PARAMS, and makes the world the
// one the transfer tests run in. leave() (or the destructor) lines the ranks up and unloads.
class ProcsRank {
public:
    ~ProcsRank() { leave(); }
    bool join(int rank, int size, const std::string &store_dir, std::string *error);
    void leave();
    uint64_t seed() const { return seed_; }

private:
    World *world_ = nullptr;
    void *module_ = nullptr;
    uint64_t seed_ = 0;
};

} // namespace xmc::conformance
