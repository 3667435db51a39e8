// Affine transfer on the host (SPEC 5, AFF-EXEC-EXACT .. AFF-NO-HANG): executes a plan's segments
// between this rank's buffers and its peers' buffers, over the group's transport.
//
// One call, in order:
//  1. The group must be usable; if not, XMC_ERR_INVALID_ARGUMENT at once (no peer can be told).
//  2. This rank checks its own request against the plan and allocates its staging. Nothing is
//     written.
//  3. Agreement: every rank contributes a TransferVote (a digest of plan, element size, budget and
//     group, and its own verdict). All ranks refuse if any rank refused or any digest differs, so
//     they refuse together before anyone writes (AFF-AGREE, AFF-REFUSE-BEFORE-WRITE).
//  4. Local segments are copied in place, one contiguous run at a time.
//  5. Peers: pairs of ranks exchange data in a fixed schedule. The sender packs the bytes of its
//     segments for that peer, in plan order, into chunks of exactly `budget` bytes (the last one may
//     be shorter). The receiver unpacks each chunk straight into its target (AFF-STAGING).
//  6. Completion: a second vote, so that a failure on one rank reaches every rank (AFF-NO-HANG).
//
// Statistics: segments this rank reads or writes; chunks, the pieces of segments moved (a local
// segment is one piece, a segment spread over k staged messages is k pieces); rounds, the staged
// messages sent and received; staging_peak, the largest of them.
//
// Transports return 0 or an xmc_status; XMC_ERR_TIMEOUT means their bound ran out. Every transport
// operation is bounded (send and recv by the transport, all_gather by the group's timeout), so a
// missing or failed peer ends a call as XMC_ERR_TIMEOUT or XMC_ERR_PEER_FAILED.
// Ranks are the group's labels; this rank is ranks[my_index] (AFF-GROUP).
#include "host.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <vector>

namespace xmc::host {
namespace {

constexpr const char *kCall = "transfer_execute";
using std::to_string;

// One side of a segment placed on a buffer: element i of the box is at element index
// base + sum(i[d] * stride[d]), counted from the buffer's pointer.
struct View {
    int ndim = 0;
    int64_t ext[XMC_MAX_DIMS] = {};
    int64_t stride[XMC_MAX_DIMS] = {};
    int64_t base = 0;
};

// FNV-1a over 64-bit words.
struct Fnv {
    uint64_t h = 0xcbf29ce484222325ull;
    void word(uint64_t x) {
        for (int b = 0; b < 8; ++b) h = (h ^ ((x >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    }
};

// Steps idx over the first m axes of ext in row-major order; false after the last index.
bool next(int64_t *idx, const int64_t *ext, int m) {
    for (int d = m - 1; d >= 0; --d) {
        if (++idx[d] < ext[d]) return true;
        idx[d] = 0;
    }
    return false;
}

// Drops axes of extent 1. Merges axis d into the axis before it wherever every view keeps its
// element order (stride[d-1] == stride[d] * ext[d]). Dense boxes thus become long runs.
// Both views have the same extents.
void simplify(View &a, View *b) {
    int n = 0;
    for (int d = 0; d < a.ndim; ++d) {
        if (a.ext[d] == 1) continue;
        const bool merge = n > 0 && a.stride[n - 1] == a.stride[d] * a.ext[d] &&
                           (!b || b->stride[n - 1] == b->stride[d] * b->ext[d]);
        for (View *v : {&a, b}) {
            if (!v) continue;
            if (merge) {
                v->ext[n - 1] *= v->ext[d];
                v->stride[n - 1] = v->stride[d];
            } else {
                v->ext[n] = v->ext[d];
                v->stride[n] = v->stride[d];
            }
        }
        if (!merge) ++n;
    }
    a.ndim = n;
    if (b) b->ndim = n;
}

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

// The number of elements of a shard shape; false when a size is negative or the count overflows.
bool shard_numel(int ndim, const int64_t *shape, int64_t *n) {
    *n = 1;
    for (int d = 0; d < ndim; ++d)
        if (shape[d] < 0 || __builtin_mul_overflow(*n, shape[d], n)) return false;
    return true;
}

// The smallest and largest element index (from ptr) reachable in a non-empty buffer's shard view;
// false on overflow.
bool reach(const xmc_shard_buffer &b, int64_t *lo, int64_t *hi) {
    *lo = *hi = b.offset;
    for (int d = 0; d < b.ndim; ++d) {
        int64_t r = 0;
        if (__builtin_mul_overflow(b.shape[d] - 1, b.strides[d], &r)) return false;
        int64_t &end = r < 0 ? *lo : *hi;
        if (__builtin_add_overflow(end, r, &end)) return false;
    }
    return true;
}

// True when no two elements of the shard view share memory. Axes are sorted by |stride|, and each
// must step past everything the faster axes reach.
bool distinct_elements(const xmc_shard_buffer &b) {
    std::vector<std::pair<int64_t, int64_t>> axes;  // |stride|, size
    for (int d = 0; d < b.ndim; ++d)
        if (b.shape[d] > 1) axes.emplace_back(b.strides[d] < 0 ? -b.strides[d] : b.strides[d], b.shape[d]);
    std::sort(axes.begin(), axes.end());
    int64_t reached = 0;  // how far the faster axes reach from an element
    for (auto [stride, size] : axes) {
        if (stride <= reached) return false;
        if (__builtin_add_overflow(reached, stride * (size - 1), &reached)) return false;
    }
    return true;
}

// Why a buffer cannot hold its shard ("" when it can). Checks dims, sizes and capacity and, for a
// target, that no two elements share memory.
std::string check_buffer(const xmc_shard_buffer &b, const std::string &side) {
    if (b.ndim < 0 || b.ndim > XMC_MAX_DIMS) return side + " buffer has " + to_string(b.ndim) + " dims";
    int64_t n = 0;
    if (!shard_numel(b.ndim, b.shape, &n)) return side + " buffer shape is negative or too large";
    if (n == 0) return "";
    if (b.kind == XMC_MEM_DEVICE && b.device != 0)
        return side + " buffer is on device " + to_string(b.device) + "; the host has device 0 only";
    int64_t lo = 0, hi = 0;
    if (!reach(b, &lo, &hi)) return side + " buffer offsets overflow";
    if (lo < 0 || uint64_t(hi) >= b.capacity)
        return side + " buffer too small: its shard reaches elements [" + to_string(lo) + ", " + to_string(hi) +
               "] of a capacity of " + to_string(b.capacity);
    if (side == "target" && !distinct_elements(b)) return "target buffer strides make elements share memory";
    return "";
}

// True when the byte ranges that two non-empty shard views reach intersect (a test on their
// extents, so interleaved buffers count as overlapping).
bool overlap(const xmc_shard_buffer &a, const xmc_shard_buffer &b, size_t elem) {
    int64_t alo = 0, ahi = 0, blo = 0, bhi = 0;
    reach(a, &alo, &ahi);
    reach(b, &blo, &bhi);
    const uintptr_t a0 = uintptr_t(a.ptr) + uintptr_t(alo) * elem, a1 = uintptr_t(a.ptr) + uintptr_t(ahi + 1) * elem;
    const uintptr_t b0 = uintptr_t(b.ptr) + uintptr_t(blo) * elem, b1 = uintptr_t(b.ptr) + uintptr_t(bhi + 1) * elem;
    return a0 < b1 && b0 < a1;
}

// Places one side of a non-empty segment (offset and strides in the shard's row-major order) on a
// buffer already checked. The segment must be a box inside the shard. Returns why not, or "".
std::string place(const xmc_segment &s, int64_t offset, const int64_t *strides, const xmc_shard_buffer &b,
                  View *v) {
    if (b.ndim != s.ndim) return "has " + to_string(s.ndim) + " dims, the buffer " + to_string(b.ndim);
    int64_t numel = 0;
    shard_numel(b.ndim, b.shape, &numel);
    if (offset < 0 || offset >= numel) return "starts at element " + to_string(offset) + ", outside its shard";
    v->ndim = s.ndim;
    v->base = b.offset;
    int64_t row = numel;  // the row-major stride of axis d
    for (int d = 0; d < s.ndim; ++d) {
        row /= b.shape[d];
        const int64_t corner = offset / row % b.shape[d];
        if (s.extents[d] > 1 && strides[d] != row)
            return "has stride " + to_string(strides[d]) + " on axis " + to_string(d) + ", not the shard's " +
                   to_string(row);
        if (corner + s.extents[d] > b.shape[d]) return "leaves its shard on axis " + to_string(d);
        v->ext[d] = s.extents[d];
        v->stride[d] = b.strides[d];
        v->base += corner * b.strides[d];
    }
    return "";
}

// A transport's answer as a status: 0 is done, XMC_ERR_TIMEOUT a timeout, anything else a peer failure.
xmc_status transport_status(int rc) {
    return rc == 0 ? XMC_OK : rc == XMC_ERR_TIMEOUT ? XMC_ERR_TIMEOUT : XMC_ERR_PEER_FAILED;
}

// This rank's part of a checked request.
struct Work {
    int me = 0;                                  // my position in the group
    std::vector<std::pair<View, View>> local;    // source and target of local segments
    std::vector<std::vector<View>> out, in;      // per peer position: views to send, to receive into
    std::vector<uint64_t> out_bytes, in_bytes;   // per peer position
    uint64_t segments = 0;                       // segments this rank reads or writes
    std::vector<char> arena;                     // staging: one chunk, reused for every peer direction
};

// Step 2: this rank's check of its own request. Returns why it refuses, or "".
std::string check_request(xmc_instance *inst, const xmc_transfer_args &a, Work &w) {
    const xmc_group &g = *a.group;
    const size_t elem = a.elem_size;
    if (elem == 0) return "element size 0";
    if (a.staging_budget < elem)
        return "staging budget " + to_string(a.staging_budget) + " B is smaller than one element (" +
               to_string(elem) + " B)";
    if (a.plan.segment_count > 0 && !a.plan.segments) return "plan has segments but no segment array";
    const bool has_src = a.source.ptr != nullptr, has_tgt = a.target.ptr != nullptr;
    for (const auto &[buf, side] : {std::pair{&a.source, "source"}, std::pair{&a.target, "target"}})
        if (buf->ptr)
            if (std::string why = check_buffer(*buf, side); !why.empty()) return why;
    int64_t src_n = 0, tgt_n = 0;
    if (has_src) shard_numel(a.source.ndim, a.source.shape, &src_n);
    if (has_tgt) shard_numel(a.target.ndim, a.target.shape, &tgt_n);
    if (src_n > 0 && tgt_n > 0 && overlap(a.source, a.target, elem)) return "source and target buffers overlap";

    w.me = g.my_index;
    w.out.assign(size_t(g.size), {});
    w.in.assign(size_t(g.size), {});
    w.out_bytes.assign(size_t(g.size), 0);
    w.in_bytes.assign(size_t(g.size), 0);
    const int32_t my_label = g.ranks[g.my_index];
    int64_t written = 0;  // target elements the plan writes here
    for (size_t i = 0; i < a.plan.segment_count; ++i) {
        const xmc_segment &s = a.plan.segments[i];
        const std::string name = "segment " + to_string(i);
        if (s.ndim < 0 || s.ndim > XMC_MAX_DIMS) return name + " has " + to_string(s.ndim) + " dims";
        int64_t volume = 0;
        if (!shard_numel(s.ndim, s.extents, &volume)) return name + " has a negative or too large extent";
        int src = -1, tgt = -1;  // positions of its ranks in the group
        for (int k = 0; k < g.size; ++k) {
            if (g.ranks[k] == s.src_rank) src = k;
            if (g.ranks[k] == s.tgt_rank) tgt = k;
        }
        if (src < 0 || tgt < 0)
            return name + " names rank " + to_string(src < 0 ? s.src_rank : s.tgt_rank) + ", not in the group";
        if (src != w.me && tgt != w.me) continue;
        ++w.segments;
        if (src == w.me && !has_src) return name + " reads rank " + to_string(my_label) + ", which has no source buffer";
        if (tgt == w.me && !has_tgt) return name + " writes rank " + to_string(my_label) + ", which has no target buffer";
        if (tgt == w.me && __builtin_add_overflow(written, volume, &written)) return name + " overflows the target";
        if (volume == 0) continue;  // an empty box moves nothing
        View sv, tv;
        if (src == w.me)
            if (std::string why = place(s, s.src_offset, s.src_strides, a.source, &sv); !why.empty())
                return name + " source " + why;
        if (tgt == w.me)
            if (std::string why = place(s, s.tgt_offset, s.tgt_strides, a.target, &tv); !why.empty())
                return name + " target " + why;
        const uint64_t bytes = uint64_t(volume) * elem;
        if (src == w.me && tgt == w.me) {
            w.local.emplace_back(sv, tv);
        } else if (src == w.me) {
            w.out[size_t(tgt)].push_back(sv);
            w.out_bytes[size_t(tgt)] += bytes;
        } else {
            w.in[size_t(src)].push_back(tv);
            w.in_bytes[size_t(src)] += bytes;
        }
    }
    // A declared target must be written whole (a shard the plan never writes is a mismatch).
    if (has_tgt && written != tgt_n)
        return "the plan writes " + to_string(written) + " elements of this rank's target shard of " +
               to_string(tgt_n);

    uint64_t chunk = 0;  // the largest chunk: the budget, or less when a direction carries less
    for (int p = 0; p < g.size; ++p)
        chunk = std::max({chunk, std::min(a.staging_budget, w.out_bytes[size_t(p)]),
                          std::min(a.staging_budget, w.in_bytes[size_t(p)])});
    try {
        w.arena.resize(size_t(chunk));
    } catch (const std::bad_alloc &) {
        return "cannot allocate " + to_string(chunk) + " B of staging";
    }
    // Work queued on the caller's stream before this call must finish before we read or write.
    if (a.stream && stream_synchronize(inst, a.stream) != XMC_OK) return "stream synchronization failed";
    return "";
}

// Sends to peer p the bytes of the views (source side), in order, packed into chunks of the arena's
// size; the last chunk may be shorter. One chunk per transport message.
xmc_status send_to(const xmc_transfer_args &a, Work &w, int p, uint64_t tag, xmc_transfer_stats &st) {
    const xmc_transport &tp = *a.group->transport;
    const size_t elem = a.elem_size, cap = size_t(std::min<uint64_t>(a.staging_budget, w.out_bytes[size_t(p)]));
    const char *src = static_cast<const char *>(a.source.ptr);
    size_t used = 0;
    int rc = 0;
    auto flush = [&] {
        rc = tp.send(tp.ctx, p, w.arena.data(), used, tag++);
        if (rc) return false;
        st.bytes_sent += used;
        st.rounds += 1;
        st.staging_peak = std::max<uint64_t>(st.staging_peak, used);
        used = 0;
        return true;
    };
    for (const View &v : w.out[size_t(p)]) {
        bool fresh = true;  // the next byte starts a new piece of this segment
        const bool ok = for_each_run(v, [&](int64_t first, int64_t count) {
            const char *from = src + first * int64_t(elem);
            for (size_t len = size_t(count) * elem; len > 0;) {
                if (fresh) st.chunks += 1, fresh = false;
                const size_t n = std::min(len, cap - used);
                std::memcpy(w.arena.data() + used, from, n);
                used += n, from += n, len -= n;
                if (used == cap) {
                    if (!flush()) return false;
                    fresh = true;
                }
            }
            return true;
        });
        if (!ok) return transport_status(rc);
    }
    if (used > 0 && !flush()) return transport_status(rc);
    return XMC_OK;
}

// Receives from peer p the chunks send_to packs and unpacks them straight into the target views.
xmc_status recv_from(const xmc_transfer_args &a, Work &w, int p, uint64_t tag, xmc_transfer_stats &st) {
    const xmc_transport &tp = *a.group->transport;
    const size_t elem = a.elem_size, cap = size_t(std::min<uint64_t>(a.staging_budget, w.in_bytes[size_t(p)]));
    char *tgt = static_cast<char *>(a.target.ptr);
    uint64_t left = w.in_bytes[size_t(p)];  // bytes still to receive
    size_t have = 0, pos = 0;              // bytes in the arena, bytes of them unpacked
    int rc = 0;
    for (const View &v : w.in[size_t(p)]) {
        bool fresh = true;
        const bool ok = for_each_run(v, [&](int64_t first, int64_t count) {
            char *to = tgt + first * int64_t(elem);
            for (size_t len = size_t(count) * elem; len > 0;) {
                if (pos == have) {
                    have = size_t(std::min<uint64_t>(cap, left));
                    rc = tp.recv(tp.ctx, p, w.arena.data(), have, tag++);
                    if (rc) return false;
                    left -= have, pos = 0;
                    st.bytes_received += have;
                    st.rounds += 1;
                    st.staging_peak = std::max<uint64_t>(st.staging_peak, have);
                    fresh = true;
                }
                if (fresh) st.chunks += 1, fresh = false;
                const size_t n = std::min(len, have - pos);
                std::memcpy(to, w.arena.data() + pos, n);
                pos += n, to += n, len -= n;
            }
            return true;
        });
        if (!ok) return transport_status(rc);
    }
    return XMC_OK;
}

// Steps 4 and 5: local segments, then each pair of ranks in turn. In step k, position i exchanges
// with position (k - i) mod n: every pair meets in exactly one step, the pairs of a step are
// disjoint, and within a pair the lower position sends first. Both ends compute the same schedule,
// so sends and receives match, and blocking sends cannot deadlock.
xmc_status move_data(const xmc_transfer_args &a, Work &w, uint64_t call_tag, xmc_transfer_stats &st) {
    for (const auto &[s, t] : w.local) {
        copy_local(s, t, static_cast<const char *>(a.source.ptr), static_cast<char *>(a.target.ptr), a.elem_size);
        int64_t volume = 0;
        shard_numel(s.ndim, s.ext, &volume);
        st.bytes_copied_locally += uint64_t(volume) * a.elem_size;
        st.chunks += 1;
    }
    const int n = a.group->size, me = w.me;
    for (int k = 0; k < n; ++k) {
        const int p = ((k - me) % n + n) % n;
        if (p == me) continue;
        xmc_status s = XMC_OK;
        if (me < p) {
            s = send_to(a, w, p, call_tag, st);
            if (s == XMC_OK) s = recv_from(a, w, p, call_tag, st);
        } else {
            s = recv_from(a, w, p, call_tag, st);
            if (s == XMC_OK) s = send_to(a, w, p, call_tag, st);
        }
        if (s != XMC_OK) return s;
    }
    return XMC_OK;
}

// A vote's reason field from a message, cut to fit.
void set_reason(TransferVote &v, const std::string &why) {
    std::snprintf(v.reason, sizeof v.reason, "%s", why.c_str());
}

}  // namespace

uint64_t transfer_digest(const xmc_transfer_args &a) {
    Fnv f;
    f.word(0x786d632d78667231ull);  // "xmc-xfr1": format tag
    f.word(a.plan.digest);          // the planner's digest, and the segments themselves
    f.word(a.plan.segment_count);
    for (size_t i = 0; a.plan.segments && i < a.plan.segment_count; ++i) {
        const xmc_segment &s = a.plan.segments[i];
        const int nd = std::clamp(s.ndim, 0, XMC_MAX_DIMS);
        for (int64_t x : {int64_t(s.src_rank), int64_t(s.tgt_rank), int64_t(s.ndim), s.src_offset, s.tgt_offset})
            f.word(uint64_t(x));
        for (int d = 0; d < nd; ++d) {
            f.word(uint64_t(s.extents[d]));
            f.word(uint64_t(s.src_strides[d]));
            f.word(uint64_t(s.tgt_strides[d]));
        }
    }
    f.word(a.elem_size);  // seed bug: a digest without the element type let ranks disagree silently
    f.word(a.staging_budget);
    f.word(uint64_t(a.group->size));
    for (int k = 0; k < a.group->size; ++k) f.word(uint64_t(int64_t(a.group->ranks[k])));
    return f.h;
}

xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *args, xmc_transfer_stats *stats) {
    // Step 1: without a usable group no peer can be told, so these fail here alone.
    if (!args || !stats) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, kCall, "%s: NULL args or stats", kCall);
    *stats = xmc_transfer_stats{};
    if (args->struct_size < sizeof(xmc_transfer_args))
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, kCall, "%s: struct_size %u < %zu", kCall,
                        args->struct_size, sizeof(xmc_transfer_args));
    const xmc_group *g = args->group;
    if (!g || !g->ranks || g->size < 1 || g->my_index < 0 || g->my_index >= g->size || !g->transport ||
        !g->transport->send || !g->transport->recv || !g->transport->all_gather)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, kCall,
                        "%s: the group needs ranks, 0 <= my_index < size and a transport with send, recv and "
                        "all_gather", kCall);
    if (g->timeout_ms == 0)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, kCall,
                        "%s: group timeout_ms is 0; a transfer must be bounded (AFF-NO-HANG)", kCall);
    for (int i = 0; i < g->size; ++i)
        for (int j = 0; j < i; ++j)
            if (g->ranks[i] < 0 || g->ranks[i] == g->ranks[j])
                return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, kCall,
                                "%s: group rank labels must be distinct and >= 0 (position %d is %d)", kCall, i,
                                g->ranks[i]);
    const xmc_transport &tp = *g->transport;
    const char *tp_name = tp.name ? tp.name : "?";
    const int32_t my_label = g->ranks[g->my_index];

    try {
        // Step 2.
        Work w;
        const std::string why = check_request(inst, *args, w);

        // Step 3: agreement. The nonces make this call's message tags differ from any earlier call's.
        TransferVote mine{};
        mine.digest = transfer_digest(*args);
        mine.nonce = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
        mine.index = g->my_index;
        mine.label = my_label;
        mine.refused = why.empty() ? 0 : 1;
        set_reason(mine, why);
        std::vector<TransferVote> votes(size_t(g->size));
        xmc_status s = transport_status(tp.all_gather(tp.ctx, &mine, votes.data(), sizeof mine, g->timeout_ms));
        if (s != XMC_OK)
            return be::fail(inst, s, 0, kCall, "%s: rank %d: the agreement over transport '%s' failed: %s within %u ms",
                            kCall, my_label, tp_name, xmc_status_string(s), g->timeout_ms);
        if (!why.empty())
            return be::fail(inst, XMC_ERR_REFUSED, 0, kCall, "%s: rank %d refused: %s", kCall, my_label, why.c_str());
        Fnv call;
        for (int k = 0; k < g->size; ++k) {
            const TransferVote &v = votes[size_t(k)];
            if (v.refused)
                return be::fail(inst, XMC_ERR_REFUSED, 0, kCall, "%s: refused because rank %d refused: %.172s", kCall,
                                v.label, v.reason);
            if (v.index != k)
                return be::fail(inst, XMC_ERR_REFUSED, 0, kCall,
                                "%s: refused: the rank at group position %d believes it is at position %d", kCall, k,
                                v.index);
            if (v.digest != votes[0].digest)
                return be::fail(inst, XMC_ERR_REFUSED, 0, kCall,
                                "%s: refused: rank %d's request differs from rank %d's (plan, element size, budget "
                                "or group)", kCall, v.label, votes[0].label);
            call.word(v.nonce);
        }

        // Steps 4 and 5. Tags: the call's id in the high half, the chunk number in the low half.
        s = move_data(*args, w, call.h << 32, *stats);
        stats->segments = w.segments;

        // Step 6: every rank learns whether every rank succeeded.
        TransferVote done{};
        done.digest = mine.digest;
        done.index = g->my_index;
        done.label = my_label;
        done.refused = s == XMC_OK ? 0 : 1;
        set_reason(done, s == XMC_OK ? "" : std::string("transport ") + xmc_status_string(s));
        const xmc_status gs = transport_status(tp.all_gather(tp.ctx, &done, votes.data(), sizeof done, g->timeout_ms));
        if (s != XMC_OK)
            return be::fail(inst, s, 0, kCall, "%s: rank %d: moving data over transport '%s' failed: %s", kCall,
                            my_label, tp_name, xmc_status_string(s));
        if (gs != XMC_OK)
            return be::fail(inst, gs, 0, kCall, "%s: rank %d: the completion vote over transport '%s' failed: %s",
                            kCall, my_label, tp_name, xmc_status_string(gs));
        for (const TransferVote &v : votes)
            if (v.refused)
                return be::fail(inst, XMC_ERR_PEER_FAILED, 0, kCall, "%s: rank %d failed: %.172s", kCall, v.label,
                                v.reason);
        return be::ok();
    } catch (const std::bad_alloc &) {
        return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, 0, kCall, "%s: rank %d: out of host memory", kCall, my_label);
    }
}

}  // namespace xmc::host
