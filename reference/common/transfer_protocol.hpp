// The transport-level parts of the affine transfer executor (SPEC 5, AFF-EXEC-EXACT .. AFF-NO-HANG)
// that every in-tree backend shares: placing segments on buffers, checking a request, the agreement
// and completion votes, and the staged pairwise exchange over the group's transport. A backend
// supplies what touches memory (Executor: its device check, its staging, its copies); the protocol
// around it is this one, so the host and the CUDA executors refuse, agree and fail alike.
//
// One call of execute(), in order:
//  1. The group must be usable; if not, XMC_ERR_INVALID_ARGUMENT at once (no peer can be told).
//  2. This rank checks its own request against the plan (check_request, then the backend's
//     prepare: staging, stream synchronization). Nothing is written.
//  3. Paths (AFF-PATH): every rank offers what it can do (a PathOffer: its process and node, the
//     paths its buffers and libraries allow, the path its caller forced), and from the offers
//     every rank computes the path each rank takes to each peer it exchanges data with
//     (choose_paths): all ranks compute the same table, so a pair whose two ends would take
//     different paths, or a forced path a pair cannot take, is seen by every rank.
//  4. Agreement: every rank contributes a TransferVote (a digest of plan, element size, budget,
//     group and layouts, a digest of the path table, and its own verdict). All ranks refuse if any
//     rank refused or any digest differs, so they refuse together before anyone writes (AFF-AGREE,
//     AFF-REFUSE-BEFORE-WRITE, AFF-LAYOUT, AFF-PATH).
//  5. The backend moves the data (Executor::move) on each peer's path: local segments, then peers,
//     the staged ones through exchange() in a fixed pairwise schedule, in chunks of at most
//     `budget` bytes.
//  6. Result (AFF-RESULT): the bytes this rank reports sent, received and copied locally must be
//     the plan's totals for it, or it fails.
//  7. Completion: a second vote, so that a failure on one rank reaches every rank (AFF-NO-HANG).
//
// Transports return 0 or an xmc_status; XMC_ERR_TIMEOUT means their bound ran out. Every transport
// operation is bounded (send and recv by the transport, all_gather by the group's timeout), so a
// missing or failed peer ends a call as XMC_ERR_TIMEOUT or XMC_ERR_PEER_FAILED.
// Ranks are the group's labels; this rank is ranks[my_index] (AFF-GROUP).
#pragma once
#include "errors.hpp"
#include "memory_book.hpp"

#include <xmc/backend.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace xmc::transfer {

// What each rank contributes to a transfer's agreement (AFF-AGREE) and to its completion vote.
struct TransferVote {
    uint64_t digest;   // Steps::digest of the sender's request
    uint64_t nonce;    // random per call: the call's message tags derive from every rank's nonce
    uint64_t paths;    // paths_digest() of the path table the sender computed (AFF-PATH)
    int64_t native;    // completion: the native code of the sender's failure (0: none)
    int32_t index;     // the group position the sender believes it holds
    int32_t label;     // the sender's rank label
    int32_t refused;   // 1 when the sender refused (agreement) or failed (completion)
    char reason[156];  // why, NUL-terminated
};

// ---- data paths (AFF-PATH) ----

// What a rank offers before the agreement (all_gather).
struct PathOffer {
    uint64_t magic;    // kOfferMagic
    uint64_t process;  // process_token(): equal tokens share an address space
    uint64_t node;     // node_token(): equal tokens share a node
    int32_t index;     // the group position the sender believes it holds
    int32_t forced;    // the xmc_path its caller forced, XMC_PATH_AUTO for the backend's choice
    uint32_t can;      // bit path_bit(p): the sender can take path p in this call
    uint32_t refused;  // 1: the sender already refuses this request (its vote says why)
};
inline constexpr uint64_t kOfferMagic = 0x786d632d70617468ull;  // "xmc-path"
inline constexpr uint32_t path_bit(xmc_path p) { return 1u << unsigned(p); }
// "auto", "direct", "ipc", "nccl", "staged", or "path N" for a value outside the enum.
std::string path_name(int32_t p);
// A random number for a call's or a run's nonce (message tags, prepared transfer ids).
uint64_t random_nonce();
// This process as its peers see it: random per process (equal tokens share an address space).
uint64_t process_token();
// This node: the kernel's boot id and the host name (equal tokens can share device memory by IPC).
uint64_t node_token();
// The path position i takes to position j for one pair that exchanges data: the forced path of
// i's caller when both ends can take it, else the first of direct (same process), IPC (same node,
// other processes), NCCL, staged that both can take. XMC_PATH_AUTO with *why set: none fits.
xmc_path choose_path(const PathOffer &from, const PathOffer &to, int32_t from_label, int32_t to_label,
                     std::string *why);

// One side of a segment placed on a buffer: element i of the box is at element index
// base + sum(i[d] * stride[d]), counted from the buffer's pointer.
struct View {
    int ndim = 0;
    int64_t ext[XMC_MAX_DIMS] = {};
    int64_t stride[XMC_MAX_DIMS] = {};
    int64_t base = 0;
};

// Steps idx over the first m axes of ext in row-major order; false after the last index.
bool next(int64_t *idx, const int64_t *ext, int m);
// Drops axes of extent 1. Merges axis d into the axis before it wherever every view keeps its
// element order (stride[d-1] == stride[d] * ext[d]). Dense boxes thus become long runs.
// Both views have the same extents.
void simplify(View &a, View *b);

// Calls f(first element index, element count) for each contiguous run of v, in row-major order.
// The innermost axis is one run when its stride is 1, else one run per element. Returns false as
// soon as f does.
template <class F>
bool for_each_run(View v, F &&f) {
    simplify(v, nullptr);
    const int n = v.ndim;
    const int64_t inner = n ? v.ext[n - 1] : 1;
    const bool dense = n == 0 || v.stride[n - 1] == 1;
    int64_t idx[XMC_MAX_DIMS] = {};
    do {
        int64_t at = v.base;
        for (int d = 0; d + 1 < n; ++d) at += idx[d] * v.stride[d];
        if (dense) {
            if (!f(at, inner)) return false;
        } else {
            for (int64_t k = 0; k < inner; ++k)
                if (!f(at + k * v.stride[n - 1], int64_t{1})) return false;
        }
    } while (next(idx, v.ext, n - 1));
    return true;
}

// The number of elements of a shard shape; false when a size is negative or the count overflows.
bool shard_numel(int ndim, const int64_t *shape, int64_t *n);
// The smallest and largest element index (from ptr) reachable in a non-empty buffer's shard view;
// false on overflow.
bool reach(const xmc_shard_buffer &b, int64_t *lo, int64_t *hi);
// Places one side of a non-empty segment (offset and strides in the shard's row-major order) on a
// buffer already checked. The segment must be a box inside the shard, or (AFF-MAP-FLAT: a piece of
// a flat shard, with other dims or strides than the shard's) distinct elements inside the shard
// on a buffer whose elements are evenly spaced. Returns why not, or "".
std::string place(const xmc_segment &s, int64_t offset, const int64_t *strides, const xmc_shard_buffer &b, View *v);
// A transport's answer as a status: 0 is done, XMC_ERR_TIMEOUT a timeout, anything else a peer failure.
xmc_status transport_status(int rc);

// This rank's part of a checked request.
struct Work {
    int me = 0;                                  // my position in the group
    std::vector<std::pair<View, View>> local;    // source and target of local segments
    std::vector<std::vector<View>> out, in;      // per peer position: views to send, to receive into
    std::vector<std::vector<size_t>> in_segments;  // per peer position: plan indices of `in`, in order
    std::vector<uint64_t> out_bytes, in_bytes;   // per peer position
    uint64_t segments = 0;                       // segments this rank reads or writes
    uint64_t chunk = 0;                          // staging a peer direction needs: min(budget, its bytes), max
    uint64_t local_bytes = 0;                    // bytes of local segments
    // AFF-PATH: per peer position, the agreed path to it (XMC_PATH_AUTO: no data either way, or
    // this rank itself). Set before move().
    std::vector<xmc_path> path;
    // Every rank's path to every position, row-major (size * size), as every rank computed it.
    std::vector<xmc_path> table;
    // The driver's code when prepare() refused because a driver call failed: this rank then
    // fails with XMC_ERR_DRIVER and that code, not as a refusal without one (the others refuse).
    int64_t native = 0;
};

// ---- prepared transfers (transfer_prepared, AFF-PREPARED-*; transfer_prepared.cpp) ----

// What each rank contributes to one run's agreement.
struct RunVote {
    uint64_t id;          // the prepared transfer's id, agreed at prepare from every rank's nonce
    uint64_t generation;  // the sender's run number of it (1, 2, ...)
    uint64_t nonce;       // random per run: the run's message tags derive from every rank's
    uint64_t board;       // the name of the board the sender holds for the group (0: none; board.hpp)
    int32_t index;        // the group position the sender believes it holds
    int32_t label;        // the sender's rank label
    int32_t refused;      // 1: the sender refuses this run (why in reason)
    int32_t stale;        // 1: because its buffer changed under the prepared transfer (XMC_ERR_STALE)
    int32_t connected;    // 1: its executor kept its connections from the last run (Executor::connected)
    int32_t reserved;
    char reason[136];
};

class Executor;
class Board;
struct Prepared;

// What the ranks agreed on at prepare, kept until release.
struct Prepared {
    uint64_t magic = 0;                  // kPreparedMagic while live
    xmc_instance *inst = nullptr;        // the instance that prepared it
    xmc_transfer_args args{};            // the caller's, its plan and layouts pointing below
    std::vector<xmc_segment> segments;
    std::vector<xmc_plan_layout> layouts;
    Work work;                           // this rank's part, its paths agreed
    uint64_t id = 0;                     // every rank's prepare nonce, hashed: one id for all ranks
    uint64_t digest = 0, paths = 0;      // the request's and the path table's, as agreed
    uint64_t generation = 0;             // runs started
    uint32_t failed_runs = 0;
    be::MemoryStamp source, target;      // the memory under each buffer at prepare
    be::MemoryStamp source_last;         // the memory under the source at the last run
    bool one_node = false;               // every rank on one node: runs may go over a board (board.hpp)
    std::shared_ptr<Board> board;        // the group's board as this transfer's last run saw it
    bool board_confirmed = false;        // every rank voted holding it: runs go over it
    std::unique_ptr<Executor> ex;        // the backend's executor, from prepare to release
};
inline constexpr uint64_t kPreparedMagic = 0x786d632d70726570ull;  // "xmc-prep"

// What a backend supplies to execute() and to prepared transfers.
class Executor {
public:
    virtual ~Executor() = default;
    // Why this backend cannot use a buffer's memory (its kind, its device), or "".
    virtual std::string check_memory(const xmc_shard_buffer &b, const std::string &side) = 0;
    // AFF-PATH: the paths this rank can take in this call (path_bit()s), after check_memory; for a
    // path it cannot take, why not in why_not[path] (used when a forced path is refused).
    // A driver call that failed while deciding sets *native (Work::native: a refusal that follows
    // is then this rank's driver_error with that code).
    virtual uint32_t paths(const xmc_transfer_args &a, std::string why_not[XMC_PATH_COUNT_], int64_t *native) = 0;
    // After the plan checks, before the agreement: allocate staging (w.chunk bytes at most per peer
    // direction) and wait for work queued on the caller's stream. Why it refuses, or "".
    virtual std::string prepare(const xmc_transfer_args &a, Work &w) = 0;
    // Step 5 once every rank agreed: each peer's data on w.path[peer]. `call_tag` is unique to the
    // call (high 32 bits). Before it returns, nothing it queued may still read or write a buffer.
    virtual xmc_status move(const xmc_transfer_args &a, Work &w, uint64_t call_tag, xmc_transfer_stats &st) = 0;

    // Prepared transfers keep one executor from prepare to release and run it many times. An
    // executor may keep what connects it to its peers (CUDA: path IPC's opened sources and the
    // buffer exchange) from one successful move() to the next while keep(true): what a run costs
    // is then the copies and the votes. connected(): it holds such connections now.
    // disconnect(): it closes them; every rank does so before a run in which any rank is not
    // connected, so that all of them connect again together (connecting is collective). The memory under the peers' buffers cannot
    // change unseen while connected: each rank checks its own buffers before every run
    // (AFF-PREPARED-STALE), and only the exporter of a mapping can see that it changed.
    // AFF-PREPARED-STALE for memory the backend never saw allocated (a framework's own device
    // allocations, which the memory book cannot know): the driver's identity of the allocation
    // under b (CUDA: its buffer ID, new for every allocation, also at a reused address), 0 when
    // the driver gives none, kNoBuffer when the driver knows no allocation there now.
    virtual uint64_t buffer_identity(const xmc_shard_buffer &) { return 0; }
    static constexpr uint64_t kNoBuffer = ~uint64_t{0};
    virtual void keep(bool) {}
    virtual bool connected() const { return false; }
    virtual void disconnect() {}
};

// The whole call (steps 1 to 7); the backend's entry point.
xmc_status execute(xmc_instance *inst, const xmc_transfer_args *args, xmc_transfer_stats *stats, Executor &ex);

// execute() in two parts, which prepared transfers call apart. agree: steps 1 to 4; on success `a`
// is the caller's request (its 0.2 members read as the caller's struct_size allows), `w` this
// rank's part with its agreed paths, `out` what the completion vote and the call's tags need.
struct Agreed {
    uint64_t digest;  // the request's (Steps::digest)
    uint64_t paths;   // the path table's
    uint64_t call;    // every rank's nonce, hashed: the same on every rank, new every call
    bool one_node = false;  // every rank offered the same node token
};
xmc_status agree(xmc_instance *inst, const xmc_transfer_args *args, xmc_transfer_stats *stats, Executor &ex,
                 xmc_transfer_args &a, Work &w, Agreed &out);
// finish: steps 5 to 7 of an agreed request; `call` makes the message tags (high 32 bits).
xmc_status finish(xmc_instance *inst, const xmc_transfer_args &a, Work &w, Executor &ex, uint64_t call,
                  const Agreed &agreed, xmc_transfer_stats *stats);

// transfer_prepared's entry points (include/xmc/backend.h says what each does) over a backend's
// executor, made by `make` once at prepare and kept until release. prepare: steps 1 to 4 of
// execute() (the checks, the paths, the agreement), once. run: this rank's buffers against the
// memory book, a run vote (one prepared transfer, one run of it, nobody's buffer stale, who kept
// its connections), the executor's prepare over the run's stream, then steps 5 to 7, connections
// kept for the next run. release: the handle is dead, its executor (and its connections) gone.
using MakeExecutor = std::unique_ptr<Executor> (*)(xmc_instance *inst);
xmc_status prepare(xmc_instance *inst, const xmc_transfer_args *args, xmc_prepared **out, MakeExecutor make);
xmc_status run(xmc_instance *inst, xmc_prepared *p, xmc_stream *s, xmc_transfer_stats *stats, xmc_path *peer_paths);
xmc_status release(xmc_instance *inst, xmc_prepared *p);
// PIN-CLOSE's sibling for transfers: the prepared transfers of `inst` still live, released (close).
uint32_t release_all_prepared(xmc_instance *inst);

// The protocol's named steps (SPEC 2's one seam, for transfers): execute() calls each through the
// process's table, steps(), which starts as reference_steps(). A broken backend of the self-test
// replaces ONE step in plant() (conformance/broken/transfer/transfer_steps.hpp); nothing else of
// the protocol is exported for it.
struct Steps {
    // Step 4, AFF-AGREE: the digest of this rank's request that its votes carry: the plan's
    // segments, digest and layouts, the element size, the staging budget and the group's labels.
    // (The forced path is not in it: paths are agreed on as a table, AFF-PATH.)
    uint64_t (*digest)(const xmc_transfer_args &a);
    // Step 3, AFF-PATH: this rank's path table (w.table, size * size, every rank's path to every
    // position) from the gathered offers, and the digest of it that its votes carry (step 4 refuses
    // when the ranks' digests differ). Why this rank refuses (why_not: its own reasons per path,
    // for a forced one), or "".
    std::string (*paths)(const xmc_transfer_args &a, const std::vector<PathOffer> &offers, Work &w,
                         const std::string why_not[XMC_PATH_COUNT_], uint64_t *digest);
    // AFF-PREPARED-STALE, -FOLLOW: why `side`'s memory now is not what prepare saw (freed; another
    // allocation, also one at the same address; a slot released), or "" (the same, or untracked;
    // a remapped slot is the same slot, followed).
    std::string (*stale)(const be::MemoryStamp &then, const be::MemoryStamp &now, const char *side);
    // AFF-PREPARED-FOLLOW: whether this rank's source moved to other memory since the last run (a
    // slot remapped), so that the connections the peers hold to it lead to the old memory.
    bool (*source_moved)(const be::MemoryStamp &last, const be::MemoryStamp &now);
    // AFF-PREPARED-AGREE: why the gathered run votes (position `me` is this rank's) do not name one
    // run of one prepared transfer, or "".
    std::string (*run_agree)(const std::vector<RunVote> &votes, int me);
    // AFF-PREPARED-EXACT: the stream a run waits for before it reads: the caller's.
    xmc_stream *(*run_stream)(xmc_stream *caller);
    // AFF-PREPARED-RELEASE: forgets a live prepared transfer and frees it; false when it is not one
    // of `inst` (then nothing changes). Also after failed runs.
    bool (*release)(xmc_instance *inst, Prepared *p);
};
Steps &steps();
const Steps &reference_steps();
// The reference's prepared-transfer steps (transfer_prepared.cpp).
std::string prepared_stale(const be::MemoryStamp &then, const be::MemoryStamp &now, const char *side);
bool prepared_source_moved(const be::MemoryStamp &last, const be::MemoryStamp &now);
std::string prepared_run_agree(const std::vector<RunVote> &votes, int me);
xmc_stream *prepared_run_stream(xmc_stream *caller);
bool prepared_release(xmc_instance *inst, Prepared *p);
// Whether p is a live prepared transfer of inst (never dereferenced otherwise).
bool prepared_live(xmc_instance *inst, Prepared *p);
// The instance of a live prepared transfer, NULL for anything else (never dereferenced then).
xmc_instance *prepared_owner(Prepared *p);

// The backend's side of staged transfers: moving bytes between its buffers and a staging arena.
// Copies may be asynchronous until packed()/unpacked() return.
class Stager {
public:
    virtual ~Stager() = default;
    // Staging: two arenas of at least Work::chunk bytes each, one for what is sent and one for what
    // is received, each reused for every peer in that direction.
    virtual char *arena(bool incoming) = 0;
    // Where the transport may read `bytes` of the source from byte `first` (counted from the
    // source's pointer) on as they are, or NULL when they must be packed into the arena first.
    // A chunk that lies within one contiguous run is then sent without staging.
    virtual const char *source_bytes(int64_t first, size_t bytes) {
        (void)first, (void)bytes;
        return nullptr;
    }
    // Likewise where the transport may write `bytes` of the target from byte `first` on, or NULL.
    virtual char *target_bytes(int64_t first, size_t bytes) {
        (void)first, (void)bytes;
        return nullptr;
    }
    // Copies `bytes` of the source, from byte `first` on, to `to` in the arena.
    virtual xmc_status pack(char *to, int64_t first, size_t bytes) = 0;
    // The packed bytes are in the arena (before a send).
    virtual xmc_status packed() { return XMC_OK; }
    // Copies `bytes` from the arena to the target, from byte `first` on.
    virtual xmc_status unpack(int64_t first, const char *from, size_t bytes) = 0;
    // The arena may be reused (before the next receive).
    virtual xmc_status unpacked() { return XMC_OK; }
};

// Each pair of ranks in turn, for the peers `staged(p)` says: in step k, position i exchanges with
// position (k - i) mod n: every pair meets in exactly one step, the pairs of a step are disjoint,
// and both ends compute the same schedule; `staged` must agree on both ends. Each direction's bytes,
// the sender's segments for that peer in plan order, go in chunks of exactly min(budget, bytes to
// that peer) (the last one may be shorter), one transport message each (AFF-STAGING). A chunk
// within one contiguous run of the source is sent from the source itself, and one within one run of
// the target received into the target itself, when the stager allows it (dense data then crosses
// without staging); otherwise it is packed into the outgoing arena, or received into the incoming
// arena and unpacked from there. Each end decides for itself; the messages are the same either way.
//
// Within a pair the directions alternate chunk by chunk, and each end packs its next chunk before
// it waits for the peer: the lower position sends chunk i, then receives the peer's chunk i; the
// higher receives, then sends. Both ends thus pack at the same time, and each unpacks while the
// other does too. Blocking sends cannot deadlock: at each step one end sends what the other receives.
template <class Staged>
xmc_status exchange(const xmc_transfer_args &a, Work &w, uint64_t call_tag, xmc_transfer_stats &st, Stager &sg,
                    Staged &&staged);
// One pair's part of exchange(): this rank and peer position p.
xmc_status exchange_with(const xmc_transfer_args &a, Work &w, int p, uint64_t tag, xmc_transfer_stats &st,
                         Stager &sg);
class Rounds;
// One pair's part of exchange_rounds().
xmc_status exchange_rounds_with(const xmc_transfer_args &a, Work &w, int p, xmc_transfer_stats &st, Stager &sg,
                                Rounds &r);

// The same schedule over a library that posts a round's two directions together (NCCL's grouped
// send and receive) instead of the group's transport: in each round of a pair, each end packs its
// next chunk, then round() sends it and receives the peer's next chunk at once, then it unpacks.
// Chunks, rounds and statistics are exchange()'s.
class Rounds {
public:
    virtual ~Rounds() = default;
    // Sends `out_bytes` from `out` to position p and receives `in_bytes` from it into `in` (either
    // may be 0), and returns once both are done (the received bytes are in `in`).
    virtual xmc_status round(int p, const char *out, size_t out_bytes, char *in, size_t in_bytes) = 0;
};
template <class Staged>
xmc_status exchange_rounds(const xmc_transfer_args &a, Work &w, xmc_transfer_stats &st, Stager &sg, Rounds &r,
                           Staged &&staged) {
    const int n = a.group->size, me = w.me;
    for (int k = 0; k < n; ++k) {
        const int p = ((k - me) % n + n) % n;
        if (p == me || !staged(p)) continue;
        if (xmc_status s = exchange_rounds_with(a, w, p, st, sg, r); s != XMC_OK) return s;
    }
    return XMC_OK;
}

template <class Staged>
xmc_status exchange(const xmc_transfer_args &a, Work &w, uint64_t call_tag, xmc_transfer_stats &st, Stager &sg,
                    Staged &&staged) {
    const int n = a.group->size, me = w.me;
    for (int k = 0; k < n; ++k) {
        const int p = ((k - me) % n + n) % n;
        if (p == me || !staged(p)) continue;
        if (xmc_status s = exchange_with(a, w, p, call_tag, st, sg); s != XMC_OK) return s;
    }
    return XMC_OK;
}

} // namespace xmc::transfer

// A platform's transfer entry points (TRANSFER and TRANSFER_PREPARED groups) over its executor,
// made by `make(inst)` (a std::unique_ptr<transfer::Executor>), once per call or run.
#define XMC_TRANSFER_ENTRIES(make)                                                                  \
    xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *args, xmc_transfer_stats *stats) { \
        return ::xmc::transfer::execute(inst, args, stats, *make(inst));                            \
    }                                                                                               \
    xmc_status transfer_prepare(xmc_instance *inst, const xmc_transfer_args *args, xmc_prepared **out) { \
        return ::xmc::transfer::prepare(inst, args, out, make);                                     \
    }                                                                                               \
    xmc_status transfer_run(xmc_instance *inst, xmc_prepared *p, xmc_stream *s, xmc_transfer_stats *stats, \
                            xmc_path *peer_paths) {                                                 \
        return ::xmc::transfer::run(inst, p, s, stats, peer_paths);                                 \
    }                                                                                               \
    xmc_status transfer_release(xmc_instance *inst, xmc_prepared *p) { return ::xmc::transfer::release(inst, p); }
