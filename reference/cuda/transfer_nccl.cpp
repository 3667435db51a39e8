// The NCCL path of the affine executor (transfer.cpp; SPEC 8: a communicator for the group, its
// unique id shared over the group's transport; grouped send and receive per round; staging in
// device memory within the budget).
//
// Communicators: one per group, cached in the instance (key: the group's labels, this rank's
// position and device; not the transport, which callers may wrap anew for every call) and
// destroyed when the instance closes. Before any write of a call that takes NCCL anywhere in its
// path table, every rank of the group (also one with no NCCL peer: the communicator is
// collective) gathers what each holds for the group; when all hold the one made together it is
// used again, else each drops its own, position 0's ncclGetUniqueId is gathered, every rank makes
// a new one (non-blocking where NCCL offers it, so that a dead peer cannot block the call) and all
// gather how that went: where any rank could not (NCCL refuses two ranks on one GPU), every rank
// refuses, nothing written, with NCCL's code.
//
// Data: the shared schedule (transfer::exchange_rounds), each round one ncclGroupStart/End with
// the chunk to the peer and the chunk from it (both ends post both at once: NCCL's point-to-point
// waits for the matching receive, so a round split into two groups deadlocks), through the device
// staging arenas the executor allocated. Each round ends when NCCL and then the stream say so, or
// after half the group's timeout: then the communicator is aborted and dropped, and the call fails
// XMC_ERR_TIMEOUT in time for the completion vote, which carries a failed peer's native code to
// this rank (AFF-NO-HANG). An NCCL error fails the call with the ncclResult_t as native code.
#include "cuda.hpp"
#include "nccl.hpp"
#include "transfer_protocol.hpp"

#include <chrono>
#include <cstring>
#include <thread>

namespace xmc::cuda {

struct NcclComms {
    struct Held {
        ncclComm_t comm = nullptr;
        uint64_t tag = 0;  // a digest of the unique id it was made from: equal on every rank of it
    };
    std::mutex mu;
    std::map<std::vector<int64_t>, Held> held;
};

namespace {

constexpr const char *kCall = "transfer_execute";
using std::to_string;

// What a rank tells its group about its communicator (all_gather).
struct Hello {
    uint64_t magic;  // kHelloMagic
    uint64_t tag;    // the held communicator's tag, 0: none
    int32_t index;
    int32_t result;  // position 0's ncclGetUniqueId answer (the second gather)
    ncclUniqueId id; // position 0's new unique id (the second gather)
};
constexpr uint64_t kHelloMagic = 0x786d632d6e63636cull;  // "xmc-nccl"

uint64_t tag_of(const ncclUniqueId &id) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (char c : id.internal) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    return h | 1;  // never 0
}

xmc_status nccl_fail(xmc_instance *inst, ncclResult_t r, const char *what, int32_t peer_label = -1) {
    const Nccl &n = Nccl::get();
    if (peer_label >= 0)
        return be::fail(inst, XMC_ERR_DRIVER, int64_t(r), kCall, "%s: %s with rank %d failed with %s (%d)", kCall, what,
                        peer_label, n.text(r), int(r));
    return be::fail(inst, XMC_ERR_DRIVER, int64_t(r), kCall, "%s: %s failed with %s (%d)", kCall, what, n.text(r), int(r));
}

using Clock = std::chrono::steady_clock;

// Waits until the communicator's pending work is done: its asynchronous error leaves
// ncclInProgress. ncclInProgress itself when the deadline passes first.
ncclResult_t settle(const Nccl &n, ncclComm_t c, Clock::time_point deadline) {
    while (true) {
        ncclResult_t async = ncclSuccess;
        if (ncclResult_t r = n.ncclCommGetAsyncError(c, &async); r != ncclSuccess) return r;
        if (async != ncclInProgress) return async;
        if (Clock::now() >= deadline) return ncclInProgress;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
}

NcclComms &comms_of(xmc_instance *inst) {
    auto *in = static_cast<Instance *>(inst);
    std::lock_guard<std::mutex> lock(in->mu);
    if (!in->nccl) in->nccl = std::make_shared<NcclComms>();
    return *in->nccl;
}

class NcclRounds final : public transfer::Rounds {
public:
    NcclRounds(xmc_instance *inst, const xmc_group &g, NcclComms &cs, std::vector<int64_t> key, ncclComm_t comm,
               CUstream stream)
        : inst_(inst), g_(g), cs_(cs), key_(std::move(key)), comm_(comm), stream_(stream) {}

    xmc_status round(int p, const char *out, size_t out_bytes, char *in, size_t in_bytes) override {
        const Nccl &n = Nccl::get();
        const char *what = "ncclGroupStart";
        ncclResult_t r = n.ncclGroupStart();
        if (r == ncclSuccess) {
            // One group: both directions progress together (AFF-NO-HANG).
            if (out_bytes) what = "ncclSend", r = n.ncclSend(out, out_bytes, ncclUint8, p, comm_, stream_);
            if (ok(r) && in_bytes) what = "ncclRecv", r = n.ncclRecv(in, in_bytes, ncclUint8, p, comm_, stream_);
            const ncclResult_t e = n.ncclGroupEnd();  // closes the group whatever happened in it
            if (ok(r)) what = "ncclGroupEnd", r = e;
        }
        if (!ok(r)) return drop(nccl_fail(inst_, r, what, g_.ranks[p]));
        const auto deadline = Clock::now() + std::chrono::milliseconds(std::max<uint32_t>(1, g_.timeout_ms / 2));
        r = settle(n, comm_, deadline);
        if (r == ncclInProgress) return drop(timeout(p));
        if (r != ncclSuccess) return drop(round_failed(p, r));
        // The operations are queued on the stream: done when the stream is.
        Driver &d = Driver::get();
        while (true) {
            const CUresult q = d.cuStreamQuery(stream_);
            if (q == CUDA_SUCCESS) {
                // An error NCCL met while it moved the data (a peer that went away mid-round) is
                // the communicator's asynchronous error by now; the stream says nothing of it. Seen
                // once the fake NCCL became stream-ordered: such a round was taken as done, its
                // bytes never received.
                ncclResult_t async = ncclSuccess;
                if (ncclResult_t e = n.ncclCommGetAsyncError(comm_, &async); e != ncclSuccess) async = e;
                return async == ncclSuccess || async == ncclInProgress ? XMC_OK : drop(round_failed(p, async));
            }
            if (q != CUDA_ERROR_NOT_READY) return drop(driver_fail(inst_, q, kCall, "cuStreamQuery"));
            if (Clock::now() >= deadline) return drop(timeout(p));
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
    }

private:
    static bool ok(ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; }
    xmc_status round_failed(int p, ncclResult_t r) {
        // A peer that closed its end (it failed, and aborted) is a peer failure: the completion vote
        // then carries its own code here (AFF-NO-HANG).
        if (r == ncclRemoteError)
            return be::fail(inst_, XMC_ERR_PEER_FAILED, int64_t(r), kCall, "%s: the NCCL round with rank %d failed with %s (%d)",
                            kCall, g_.ranks[p], Nccl::get().text(r), int(r));
        return nccl_fail(inst_, r, "the round (ncclCommGetAsyncError)", g_.ranks[p]);
    }
    xmc_status timeout(int p) {
        return be::fail(inst_, XMC_ERR_TIMEOUT, 0, kCall,
                        "%s: the NCCL round with rank %d did not finish within %u ms; the communicator was aborted",
                        kCall, g_.ranks[p], std::max<uint32_t>(1, g_.timeout_ms / 2));
    }
    // A communicator that failed or timed out is aborted (NCCL's way to stop its work) and
    // forgotten: the next call makes a new one.
    xmc_status drop(xmc_status s) {
        {
            std::lock_guard<std::mutex> lock(cs_.mu);
            auto it = cs_.held.find(key_);
            if (it != cs_.held.end() && it->second.comm == comm_) cs_.held.erase(it);
        }
        Nccl::get().ncclCommAbort(comm_);
        return s;
    }

    xmc_instance *inst_;
    const xmc_group &g_;
    NcclComms &cs_;
    std::vector<int64_t> key_;
    ncclComm_t comm_;
    CUstream stream_;
};

// The group's communicator, held or made with every rank of the group.
xmc_status communicator(xmc_instance *inst, const xmc_group &g, NcclComms &cs, const std::vector<int64_t> &key,
                        const std::string &unavailable, ncclComm_t *out) {
    const Nccl &n = Nccl::get();
    const xmc_transport &tp = *g.transport;
    NcclComms::Held held;
    {
        std::lock_guard<std::mutex> lock(cs.mu);
        if (auto it = cs.held.find(key); it != cs.held.end()) held = it->second;
    }
    Hello mine{};
    mine.magic = kHelloMagic;
    mine.tag = held.tag;
    mine.index = g.my_index;
    mine.result = unavailable.empty() ? ncclSuccess : ncclSystemError;  // (the first gather: NCCL here or not)
    std::vector<Hello> all(size_t(g.size));
    auto gather = [&](const char *what) -> xmc_status {
        const xmc_status s = transfer::transport_status(tp.all_gather(tp.ctx, &mine, all.data(), sizeof mine, g.timeout_ms));
        if (s != XMC_OK)
            return be::fail(inst, s, 0, kCall, "%s: %s over transport '%s' failed: %s", kCall, what,
                            tp.name ? tp.name : "?", xmc_status_string(s));
        for (int k = 0; k < g.size; ++k)
            if (all[size_t(k)].magic != kHelloMagic || all[size_t(k)].index != k)
                return be::fail(inst, XMC_ERR_PEER_FAILED, 0, kCall,
                                "%s: the rank at group position %d sent no NCCL communicator this executor reads", kCall, k);
        return XMC_OK;
    };
    if (xmc_status s = gather("comparing NCCL communicators"); s != XMC_OK) return s;
    // A rank of the group without NCCL (another installation) cannot join: every rank says so now.
    for (int k = 0; k < g.size; ++k)
        if (all[size_t(k)].result != ncclSuccess)
            return be::fail(inst, XMC_ERR_REFUSED, 0, kCall, "%s: path nccl: rank %d has no NCCL%s%s", kCall, g.ranks[k],
                            k == g.my_index ? ": " : "", k == g.my_index ? unavailable.c_str() : "");
    bool same = held.comm != nullptr;
    for (const Hello &h : all) same = same && h.tag == held.tag;
    if (same) return *out = held.comm, XMC_OK;
    // Not made together (a peer dropped its own, or none holds one): a new one for everybody.
    if (held.comm) {
        {
            std::lock_guard<std::mutex> lock(cs.mu);
            cs.held.erase(key);
        }
        n.ncclCommAbort(held.comm);
    }
    mine.tag = 0;
    mine.result = ncclSuccess;
    if (g.my_index == 0) mine.result = n.ncclGetUniqueId(&mine.id);
    if (xmc_status s = gather("sharing the NCCL unique id"); s != XMC_OK) return s;
    if (mine.result != ncclSuccess) return nccl_fail(inst, ncclResult_t(mine.result), "ncclGetUniqueId");
    if (all[0].result != ncclSuccess)
        return be::fail(inst, XMC_ERR_PEER_FAILED, 0, kCall, "%s: rank %d could not make an NCCL unique id", kCall,
                        g.ranks[0]);
    const ncclUniqueId id = all[0].id;
    ncclComm_t comm = nullptr;
    ncclResult_t r;
    const char *what = "ncclCommInitRankConfig";
    if (n.ncclCommInitRankConfig) {
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;  // init and groups answer ncclInProgress; settle() waits, bounded
        r = n.ncclCommInitRankConfig(&comm, g.size, id, g.my_index, &config);
    } else {
        what = "ncclCommInitRank";
        r = n.ncclCommInitRank(&comm, g.size, id, g.my_index);
    }
    // Half the bound: a rank that waits it out still meets the others in the gather below.
    if (r == ncclInProgress)
        r = settle(n, comm, Clock::now() + std::chrono::milliseconds(std::max<uint32_t>(1, g.timeout_ms / 2)));
    // Whether every rank has joined: any that has not makes all refuse (nothing is written yet).
    mine.result = r;
    mine.id = ncclUniqueId{};
    if (xmc_status s = gather("agreeing on the NCCL communicator"); s != XMC_OK) {
        if (comm) n.ncclCommAbort(comm);
        return s;
    }
    // The rank named is one whose NCCL answered an error, else one that waited in vain for it.
    int bad = -1;
    for (int k = 0; k < g.size; ++k) {
        const ncclResult_t rk = ncclResult_t(all[size_t(k)].result);
        if (rk != ncclSuccess && (bad < 0 || (ncclResult_t(all[size_t(bad)].result) == ncclInProgress && rk != ncclInProgress)))
            bad = k;
    }
    if (bad >= 0) {
        if (comm) n.ncclCommAbort(comm);
        const ncclResult_t rk = ncclResult_t(all[size_t(bad)].result);
        const std::string why = rk == ncclInProgress ? std::string("it did not finish within ") +
                                                           to_string(std::max<uint32_t>(1, g.timeout_ms / 2)) + " ms"
                                                     : std::string("it failed with ") + n.text(rk) + " (" +
                                                           to_string(int(rk)) + ")";
        return be::fail(inst, XMC_ERR_REFUSED, rk == ncclInProgress ? 0 : int64_t(rk), kCall,
                        "%s: path nccl: rank %d could not join the group's NCCL communicator (%s): %s", kCall,
                        g.ranks[bad], what, why.c_str());
    }
    std::lock_guard<std::mutex> lock(cs.mu);
    cs.held[key] = NcclComms::Held{comm, tag_of(id)};
    return *out = comm, XMC_OK;
}

} // namespace

std::string nccl_unavailable() {
    const Nccl &n = Nccl::get();
    if (!n.usable) return n.why;
    if (!Driver::get().cuStreamQuery) return "the driver does not export cuStreamQuery, which the NCCL path needs";
    return "";
}

bool nccl_anywhere(const transfer::Work &w) {
    return std::find(w.table.begin(), w.table.end(), XMC_PATH_NCCL) != w.table.end();
}

xmc_status nccl_join(xmc_instance *inst, const xmc_transfer_args &a, int32_t device, NcclLink *link) {
    const xmc_group &g = *a.group;
    link->key = {g.my_index, device};
    for (int k = 0; k < g.size; ++k) link->key.push_back(g.ranks[k]);
    ncclComm_t comm = nullptr;
    const xmc_status s = communicator(inst, g, comms_of(inst), link->key, nccl_unavailable(), &comm);
    link->comm = comm;
    return s;
}

bool nccl_held(xmc_instance *inst, const NcclLink &link) {
    if (!link.comm) return false;
    NcclComms &cs = comms_of(inst);
    std::lock_guard<std::mutex> lock(cs.mu);
    const auto it = cs.held.find(link.key);
    return it != cs.held.end() && it->second.comm == link.comm;
}

xmc_status nccl_move(xmc_instance *inst, const xmc_transfer_args &a, transfer::Work &w, xmc_transfer_stats &st,
                     transfer::Stager &sg, const NcclLink &link, CUstream stream) {
    NcclRounds rounds(inst, *a.group, comms_of(inst), link.key, static_cast<ncclComm_t>(link.comm), stream);
    return transfer::exchange_rounds(a, w, st, sg, rounds, [&](int p) { return w.path[size_t(p)] == XMC_PATH_NCCL; });
}

void nccl_close(Instance *in) {
    std::shared_ptr<NcclComms> cs;
    {
        std::lock_guard<std::mutex> lock(in->mu);
        cs.swap(in->nccl);
    }
    if (!cs) return;
    const Nccl &n = Nccl::get();
    std::lock_guard<std::mutex> lock(cs->mu);
    for (auto &[key, held] : cs->held)
        if (n.ncclCommDestroy(held.comm) != ncclSuccess) n.ncclCommAbort(held.comm);
    cs->held.clear();
}

} // namespace xmc::cuda
