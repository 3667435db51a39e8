// Affine transfer on the host (SPEC 5, AFF-EXEC-EXACT .. AFF-NO-HANG): executes a plan's segments
// between this rank's buffers and its peers' buffers, over the group's transport. The protocol
// (checks, votes, the staged exchange) is reference/common/transfer_protocol.hpp, shared with the
// other backends' executors; this file supplies host memory: the device check, a staging arena of
// host memory, and memcpy for local segments, packing and unpacking.
//
// One call, in order:
//  1. The group must be usable; if not, XMC_ERR_INVALID_ARGUMENT at once (no peer can be told).
//  2. This rank checks its own request against the plan and allocates its staging. Nothing is
//     written.
//  3. Paths (AFF-PATH): the host has one data path, staged over the group's transport; a request
//     forcing another is refused by every rank.
//  4. Agreement: every rank contributes a TransferVote (a digest of plan, layouts, element size,
//     budget and group, of the path table, and its own verdict). All ranks refuse if any rank
//     refused or any digest differs, so they refuse together before anyone writes (AFF-AGREE,
//     AFF-REFUSE-BEFORE-WRITE, AFF-LAYOUT).
//  5. Local segments are copied in place, one contiguous run at a time.
//  6. Peers: pairs of ranks exchange data in a fixed schedule. The sender packs the bytes of its
//     segments for that peer, in plan order, into chunks of exactly `budget` bytes (the last one may
//     be shorter). The receiver unpacks each chunk straight into its target (AFF-STAGING). A chunk
//     within one contiguous run is sent from the source, or received into the target, directly.
//     AFF-STAGING-REUSE: the outgoing arena is packed again only after the transport's send of the
//     chunk in it returned (a send reads its buffer until then), and the incoming one receives
//     again only after the last chunk was unpacked from it: every copy here is synchronous.
//  7. Result and completion: the bytes moved must be the plan's (AFF-RESULT), and a second vote
//     makes a failure on one rank reach every rank (AFF-NO-HANG).
//
// Statistics: segments this rank reads or writes; chunks, the pieces of segments moved (a local
// segment is one piece, a segment spread over k messages is k pieces); rounds, the messages sent
// and received; staging_peak, the largest of them that went through staging.
//
// Transports return 0 or an xmc_status; XMC_ERR_TIMEOUT means their bound ran out. Every transport
// operation is bounded (send and recv by the transport, all_gather by the group's timeout), so a
// missing or failed peer ends a call as XMC_ERR_TIMEOUT or XMC_ERR_PEER_FAILED.
// Ranks are the group's labels; this rank is ranks[my_index] (AFF-GROUP).
#include "host.hpp"
#include "transfer_protocol.hpp"

#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace xmc::host {
namespace {

using transfer::next;
using transfer::simplify;
using transfer::View;
using std::to_string;

// Local copies at least this large run on a helper thread during the exchange.
constexpr uint64_t kLocalThreadBytes = uint64_t{4} << 20;

// AFF-EXEC-EXACT: in place, never through a temporary of the target's extent (which clobbers the
// memory between a strided target's elements).
// Copies a local segment in place, run by run (one memcpy per run when both sides are dense).
void copy_local(View s, View t, const char *src, char *tgt, size_t elem) {
    simplify(s, &t);
    const int n = s.ndim;
    const int64_t inner = n ? s.ext[n - 1] : 1;
    const bool dense = n == 0 || (s.stride[n - 1] == 1 && t.stride[n - 1] == 1);
    int64_t idx[XMC_MAX_DIMS] = {};
    do {
        int64_t a = s.base, b = t.base;
        for (int d = 0; d + 1 < n; ++d) a += idx[d] * s.stride[d], b += idx[d] * t.stride[d];
        if (dense) {
            std::memcpy(tgt + b * elem, src + a * elem, size_t(inner) * elem);
        } else {
            for (int64_t k = 0; k < inner; ++k)
                std::memcpy(tgt + (b + k * t.stride[n - 1]) * elem, src + (a + k * s.stride[n - 1]) * elem, elem);
        }
    } while (next(idx, s.ext, n - 1));
}

// Staging: one host allocation per thread, holding the arena for sending and the one for receiving,
// reused for every peer and kept between calls, so
// that repeated transfers do not fault its pages in again (fresh pages cost more than the copy).
// It only grows; a thread's arena is freed when the thread ends. Its memory is not cleared.
struct Arena {
    std::unique_ptr<char[]> data;
    size_t size = 0;
};
thread_local Arena t_arena;

// Host memory: staging is the thread's arena; chunks within one run go from and to the buffers
// themselves.
class HostExecutor final : public transfer::Executor, public transfer::Stager {
public:
    explicit HostExecutor(xmc_instance *inst) : inst_(inst) {}

    std::string check_memory(const xmc_shard_buffer &b, const std::string &side) override {
        if (b.kind == XMC_MEM_DEVICE && b.device != 0)
            return side + " buffer is on device " + to_string(b.device) + "; the host has device 0 only";
        return "";
    }

    uint32_t paths(const xmc_transfer_args &, std::string why_not[XMC_PATH_COUNT_], int64_t *) override {
        for (xmc_path p : {XMC_PATH_DIRECT, XMC_PATH_IPC, XMC_PATH_NCCL})
            why_not[p] = "the host backend moves data over the group's transport only";
        return transfer::path_bit(XMC_PATH_STAGED);
    }

    std::string prepare(const xmc_transfer_args &a, transfer::Work &w) override {
        // AFF-STAGING: two arenas of Work::chunk, at most the budget each.
        if (t_arena.size < 2 * w.chunk) {  // one chunk to send, one received
            t_arena = Arena{};
            t_arena.data.reset(new (std::nothrow) char[size_t(2 * w.chunk)]);
            if (!t_arena.data) return "cannot allocate " + to_string(2 * w.chunk) + " B of staging";
            t_arena.size = size_t(2 * w.chunk);
        }
        chunk_ = size_t(w.chunk);
        // Work queued on the caller's stream before this call must finish before we read or write.
        if (a.stream && stream_synchronize(inst_, a.stream) != XMC_OK) return "stream synchronization failed";
        src_ = static_cast<const char *>(a.source.ptr);
        tgt_ = static_cast<char *>(a.target.ptr);
        return "";
    }

    // Local segments in place, then each pair of ranks in turn (transfer::exchange).
    xmc_status move(const xmc_transfer_args &a, transfer::Work &w, uint64_t call_tag,
                    xmc_transfer_stats &st) override {
        uint64_t local_bytes = 0;
        for (const auto &[s, t] : w.local) {
            int64_t volume = 0;
            transfer::shard_numel(s.ndim, s.ext, &volume);
            local_bytes += uint64_t(volume) * a.elem_size;
            st.chunks += 1;
        }
        // AFF-ACCOUNT: local segments are copied locally, never sent.
        st.bytes_copied_locally = local_bytes;
        auto copy_all = [&] {
            for (const auto &[s, t] : w.local) copy_local(s, t, src_, tgt_, a.elem_size);
        };
        // Large local copies run on a helper thread while the peers' data crosses the transport
        // (they write target elements no peer writes); small ones are not worth a thread.
        std::thread helper;
        if (local_bytes >= kLocalThreadBytes && w.local.size() < w.segments) {
            try {
                helper = std::thread(copy_all);
            } catch (const std::system_error &) {
            }
        }
        if (!helper.joinable()) copy_all();
        const xmc_status s =
            transfer::exchange(a, w, call_tag, st, *this, [&](int p) { return w.path[size_t(p)] == XMC_PATH_STAGED; });
        if (helper.joinable()) helper.join();
        return s;
    }

    char *arena(bool incoming) override { return t_arena.data.get() + (incoming ? chunk_ : 0); }
    const char *source_bytes(int64_t first, size_t) override { return src_ + first; }
    char *target_bytes(int64_t first, size_t) override { return tgt_ + first; }
    xmc_status pack(char *to, int64_t first, size_t bytes) override {
        std::memcpy(to, src_ + first, bytes);
        return XMC_OK;
    }
    xmc_status unpack(int64_t first, const char *from, size_t bytes) override {
        std::memcpy(tgt_ + first, from, bytes);
        return XMC_OK;
    }

private:
    xmc_instance *inst_;
    const char *src_ = nullptr;
    char *tgt_ = nullptr;
    size_t chunk_ = 0;  // the size of each arena
};

std::unique_ptr<transfer::Executor> make_executor(xmc_instance *inst) { return std::make_unique<HostExecutor>(inst); }

}  // namespace

// AFF-REFUSE-BEFORE-WRITE, AFF-AGREE, AFF-GROUP, AFF-NO-HANG, AFF-PREPARED-*: the shared protocol
// (transfer_protocol.cpp, transfer_prepared.cpp) around host memory.
XMC_TRANSFER_ENTRIES(make_executor)

}  // namespace xmc::host
