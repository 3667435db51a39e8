// Multi-rank worlds for the AFF transfer tests (SPEC 6). One test body runs on every rank of one or
// more groups: on threads of this process over the threads transport (transport_threads.hpp, for
// `ctest -L pr`), or one rank per MPI process over gloo (conformance/multirank). Each rank checks
// its own results and returns its own failures. run() gives every process the failures of every
// rank, so all ranks reach one verdict, and rapidcheck takes the same path on all of them (cases
// are drawn from one seed that rank 0 chooses).
#pragma once
#include <xmc/backend.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace xmc::conformance {

// A group to run in: world ranks in group order, and the rank label of each.
struct GroupSpec {
    std::vector<int> members;
    std::vector<int32_t> labels;
};

// What a rank's body is given: its place in its group and its end of the group's transport.
struct RankEnv {
    int world_rank = 0;
    int group = 0;      // which GroupSpec of the run
    int32_t index = 0;  // position in the group
    std::vector<int32_t> labels;
    const xmc_transport *transport = nullptr;
    uint32_t timeout_ms = 0;  // the group's timeout (AFF-NO-HANG)

    int32_t label() const { return labels[size_t(index)]; }
    xmc_group group_view() const {
        return xmc_group{index, int32_t(labels.size()), labels.data(), transport, timeout_ms};
    }
};

// A rank's body returns its failures ("" never; an empty list means the rank passed).
using RankBody = std::function<std::vector<std::string>(const RankEnv &)>;

class World {
public:
    virtual ~World() = default;
    virtual const char *name() const = 0;  // the transport: "threads" or "gloo"
    virtual int size() const = 0;
    // Runs body on every member of every group at once (the groups are disjoint). Each group gets
    // a transport of its own whose send and recv give up after op_timeout_ms; the group's timeout
    // is op_timeout_ms too. Returns the failures of every rank, each prefixed with the rank,
    // identical on every process. A rank still running after deadline_ms is a failure: the world
    // aborts its transport so that it returns.
    virtual std::vector<std::string> run(const std::vector<GroupSpec> &groups, uint32_t op_timeout_ms,
                                         uint32_t deadline_ms, const RankBody &body) = 0;
    // How many random cases a property draws (fewer where every case costs processes).
    virtual int property_cases() const { return 100; }
};

// The world the transfer tests run in: a threads world of 4 ranks unless the runner set another.
World &world();
void set_world(World *w);

// The default world as one group: every world rank, labelled by its world rank.
GroupSpec whole_world(const World &w);

// The data paths transfers took (AFF-PATH), counted once per successful transfer and peer it moved
// bytes with, so that `xmc qualify` can say which paths a world ran (the IPC path shows only where
// ranks are processes). Thread-safe; take_paths_taken() returns the counts by path name and resets.
void count_path_taken(int path);
std::map<std::string, uint64_t> take_paths_taken();

// A transport wrapper that records what crosses this rank's end, per peer, and can fail one
// operation or drop every send, for checks that take nothing on the backend's word. Thread-safe
// (an executor may send from a thread of its own); read the counts once the transfer returned.
class RecordingTransport {
public:
    struct Peer {
        uint64_t sends = 0, recvs = 0;
        uint64_t bytes_sent = 0, bytes_received = 0;
        uint64_t largest = 0;  // the largest message either way
    };
    RecordingTransport(const xmc_transport *inner, int group_size);
    const xmc_transport *transport() const { return &self_; }

    std::vector<Peer> peers;
    uint64_t all_gathers = 0;
    // The send or recv with this number (counting both from 0) fails with XMC_ERR_PEER_FAILED
    // without reaching the inner transport; -1: none does.
    int64_t fail_op = -1;
    // Every send answers success without reaching the inner transport (a peer that never sends).
    bool drop_sends = false;

private:
    static int send(void *ctx, int32_t peer, const void *buf, size_t bytes, uint64_t tag);
    static int recv(void *ctx, int32_t peer, void *buf, size_t bytes, uint64_t tag);
    static int all_gather(void *ctx, const void *in, void *out, size_t bytes, uint32_t timeout_ms);
    bool should_fail();

    const xmc_transport *inner_;
    xmc_transport self_;
    int64_t ops_ = 0;
    std::mutex mu_;  // guards the counts and ops_
};

} // namespace xmc::conformance
