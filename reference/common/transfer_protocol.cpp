// The shared affine transfer protocol (transfer_protocol.hpp): checks, votes and the staged
// exchange. Moved here unchanged from the host executor, so that every backend's executor keeps
// the host's contract; what touches memory is the backend's (Executor, Stager).
#include "transfer_protocol.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <new>
#include <random>
#include <string>
#include <vector>

namespace xmc::transfer {
namespace {

constexpr const char *kCall = "transfer_execute";
using std::to_string;

// FNV-1a over 64-bit words.
struct Fnv {
    uint64_t h = 0xcbf29ce484222325ull;
    void word(uint64_t x) {
        for (int b = 0; b < 8; ++b) h = (h ^ ((x >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    }
};

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

// Why a buffer cannot hold its shard ("" when it can). Checks dims, sizes, the backend's view of its
// memory and capacity and, for a target, that no two elements share memory.
std::string check_buffer(const xmc_shard_buffer &b, const std::string &side, Executor &ex) {
    if (b.ndim < 0 || b.ndim > XMC_MAX_DIMS) return side + " buffer has " + to_string(b.ndim) + " dims";
    int64_t n = 0;
    if (!shard_numel(b.ndim, b.shape, &n)) return side + " buffer shape is negative or too large";
    if (n == 0) return "";
    if (std::string why = ex.check_memory(b, side); !why.empty()) return why;
    int64_t lo = 0, hi = 0;
    if (!reach(b, &lo, &hi)) return side + " buffer offsets overflow";
    // AFF-REFUSE-BEFORE-WRITE: a buffer too small for its shard.
    if (lo < 0 || uint64_t(hi) >= b.capacity)
        return side + " buffer too small: its shard reaches elements [" + to_string(lo) + ", " + to_string(hi) +
               "] of a capacity of " + to_string(b.capacity);
    // AFF-REFUSE-BEFORE-WRITE: a target whose elements share memory.
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

// Step 2: this rank's check of its own request, then the backend's preparation. Returns why it
// refuses, or "".
std::string check_request(const xmc_transfer_args &a, Work &w, Executor &ex) {
    const xmc_group &g = *a.group;
    const size_t elem = a.elem_size;
    if (elem == 0) return "element size 0";
    // AFF-STAGING: a budget smaller than one element is refused up front.
    if (a.staging_budget < elem)
        return "staging budget " + to_string(a.staging_budget) + " B is smaller than one element (" +
               to_string(elem) + " B)";
    if (a.plan.segment_count > 0 && !a.plan.segments) return "plan has segments but no segment array";
    const bool has_src = a.source.ptr != nullptr, has_tgt = a.target.ptr != nullptr;
    for (const auto &[buf, side] : {std::pair{&a.source, "source"}, std::pair{&a.target, "target"}})
        if (buf->ptr)
            if (std::string why = check_buffer(*buf, side, ex); !why.empty()) return why;
    int64_t src_n = 0, tgt_n = 0;
    if (has_src) shard_numel(a.source.ndim, a.source.shape, &src_n);
    if (has_tgt) shard_numel(a.target.ndim, a.target.shape, &tgt_n);
    // AFF-REFUSE-BEFORE-WRITE: source and target overlapping.
    if (src_n > 0 && tgt_n > 0 && overlap(a.source, a.target, elem)) return "source and target buffers overlap";

    w.me = g.my_index;
    w.out.assign(size_t(g.size), {});
    w.in.assign(size_t(g.size), {});
    w.in_segments.assign(size_t(g.size), {});
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
        // AFF-GROUP: a segment's ranks are looked up among the group's labels.
        int src = -1, tgt = -1;  // positions of its ranks in the group
        for (int k = 0; k < g.size; ++k) {
            if (g.ranks[k] == s.src_rank) src = k;
            if (g.ranks[k] == s.tgt_rank) tgt = k;
        }
        if (src < 0 || tgt < 0)
            return name + " names rank " + to_string(src < 0 ? s.src_rank : s.tgt_rank) + ", not in the group";
        if (src != w.me && tgt != w.me) continue;
        ++w.segments;
        // AFF-REFUSE-BEFORE-WRITE: a missing binding (no source or no target).
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
            w.in_segments[size_t(src)].push_back(i);
            w.in_bytes[size_t(src)] += bytes;
        }
    }
    // AFF-REFUSE-BEFORE-WRITE: refused, so a declared target is never silently left unwritten (a rank
    // whose target map had no pieces).
    // A declared target must be written whole (a shard the plan never writes is a mismatch), or,
    // where its shard holds padding that no plan writes (AFF-MAP-FLAT), in part: never more than
    // the shard, never none of a non-empty one. (The plan does not say where the padding lies; the
    // planner writes every other element exactly once, AFF-PLAN-EXACT.)
    if (has_tgt && (written > tgt_n || (tgt_n > 0 && written == 0)))
        return "the plan writes " + to_string(written) + " elements of this rank's target shard of " +
               to_string(tgt_n);

    // AFF-STAGING: per peer direction, min(budget, bytes to that peer).
    for (int p = 0; p < g.size; ++p)
        w.chunk = std::max({w.chunk, std::min(a.staging_budget, w.out_bytes[size_t(p)]),
                            std::min(a.staging_budget, w.in_bytes[size_t(p)])});
    return ex.prepare(a, w);
}

// A vote's reason field from a message, cut to fit.
void set_reason(TransferVote &v, const std::string &why) {
    std::snprintf(v.reason, sizeof v.reason, "%s", why.c_str());
}

std::string dims(int ndim, const int64_t *v) {
    std::string s = "[";
    for (int d = 0; d < ndim; ++d) s += (d ? ", " : "") + to_string(v[d]);
    return s + "]";
}

// AFF-LAYOUT: one side of this rank's request against the layout the plan was made for.
std::string check_side_layout(const xmc_shard_buffer &b, const xmc_shard_layout &l, const std::string &side) {
    const bool has = b.ptr != nullptr;
    if (has != (l.present != 0))
        return has ? "the plan was made without a " + side + " shard on this rank, and a " + side + " buffer is given"
                   : "";  // a missing buffer the plan needs is refused as a missing binding
    if (!has) return "";
    const std::string made = "; the plan was made for ";
    if (b.kind != l.kind)
        return side + " buffer is memory kind " + to_string(int(b.kind)) + made + to_string(int(l.kind));
    if (b.ndim != l.ndim || l.ndim < 0 || l.ndim > XMC_MAX_DIMS)
        return side + " buffer has " + to_string(b.ndim) + " dims" + made + to_string(l.ndim);
    if (!std::equal(b.shape, b.shape + b.ndim, l.shape))
        return side + " buffer's shard shape " + dims(b.ndim, b.shape) + " (its element count) differs" + made +
               dims(l.ndim, l.shape);
    if (b.offset != l.offset)
        return side + " buffer's offset " + to_string(b.offset) + " differs" + made + to_string(l.offset);
    if (!std::equal(b.strides, b.strides + b.ndim, l.strides))
        return side + " buffer's strides " + dims(b.ndim, b.strides) + " differ" + made + dims(l.ndim, l.strides);
    return "";
}

// AFF-LAYOUT: this rank's buffers and element size against its entry of the plan's layouts (none
// given: nothing to check). Returns why it refuses, or "".
std::string check_layout(const xmc_transfer_args &a, const xmc_plan_layout *layouts, size_t count) {
    if (!layouts) return count == 0 ? "" : "the plan says it has " + to_string(count) + " layouts but gives none";
    const int32_t me = a.group->ranks[a.group->my_index];
    const xmc_plan_layout *mine = nullptr;
    for (size_t i = 0; i < count; ++i) {
        if (layouts[i].rank != me) continue;
        if (mine) return "the plan's layouts name rank " + to_string(me) + " twice";
        mine = &layouts[i];
    }
    if (!mine) {
        if (!a.source.ptr && !a.target.ptr) return "";
        return "the plan's layouts have no entry for rank " + to_string(me) + ", which gives buffers";
    }
    if (mine->elem_size != a.elem_size)
        return "element size " + to_string(a.elem_size) + " B; the plan was made for " +
               to_string(mine->elem_size) + " B";
    if (std::string why = check_side_layout(a.source, mine->source, "source"); !why.empty()) return why;
    return check_side_layout(a.target, mine->target, "target");
}

// The bytes of this rank's local segments.
uint64_t local_bytes(const Work &w, size_t elem) {
    uint64_t n = 0;
    for (const auto &[s, t] : w.local) {
        int64_t volume = 0;
        shard_numel(s.ndim, s.ext, &volume);
        n += uint64_t(volume) * elem;
    }
    return n;
}

// For every pair of positions: true when a non-empty segment goes one way or the other (row-major).
std::vector<char> exchanging_pairs(const xmc_transfer_args &a) {
    const xmc_group &g = *a.group;
    const size_t n = size_t(g.size);
    std::map<int32_t, size_t> pos;
    for (size_t k = 0; k < n; ++k) pos[g.ranks[k]] = k;
    std::vector<char> pairs(n * n, 0);
    for (size_t i = 0; a.plan.segments && i < a.plan.segment_count; ++i) {
        const xmc_segment &s = a.plan.segments[i];
        int64_t volume = 0;
        if (s.ndim < 0 || s.ndim > XMC_MAX_DIMS || !shard_numel(s.ndim, s.extents, &volume) || volume == 0) continue;
        auto src = pos.find(s.src_rank), tgt = pos.find(s.tgt_rank);
        if (src == pos.end() || tgt == pos.end() || src->second == tgt->second) continue;
        pairs[src->second * n + tgt->second] = pairs[tgt->second * n + src->second] = 1;
    }
    return pairs;
}

// AFF-PATH: the path table from every rank's offer (every rank computes the same one), or why no
// table can be agreed on. `mine_why` explains this rank's own missing paths.
std::string path_table(const xmc_transfer_args &a, const std::vector<PathOffer> &offers, Work &w,
                       const std::string mine_why[XMC_PATH_COUNT_]) {
    const xmc_group &g = *a.group;
    const size_t n = size_t(g.size);
    const std::vector<char> pairs = exchanging_pairs(a);
    w.table.assign(n * n, XMC_PATH_AUTO);
    std::string first_why;
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j) {
            if (!pairs[i * n + j]) continue;
            std::string why;
            w.table[i * n + j] = choose_path(offers[i], offers[j], g.ranks[i], g.ranks[j], &why);
            if (w.table[i * n + j] == XMC_PATH_AUTO && first_why.empty()) {
                const int32_t f = offers[i].forced;
                const bool about_me = int(i) == w.me || int(j) == w.me;
                first_why = why;
                if (about_me && f > XMC_PATH_AUTO && f < XMC_PATH_COUNT_ && !(offers[size_t(w.me)].can & path_bit(xmc_path(f))) &&
                    !mine_why[f].empty())
                    first_why += " (" + mine_why[f] + ")";
            }
        }
    if (!first_why.empty()) return first_why;
    for (size_t i = 0; i < n; ++i)
        for (size_t j = i + 1; j < n; ++j)
            if (w.table[i * n + j] != w.table[j * n + i])
                return "rank " + to_string(g.ranks[i]) + " takes path " + path_name(w.table[i * n + j]) + " to rank " +
                       to_string(g.ranks[j]) + ", which takes path " + path_name(w.table[j * n + i]) + " back";
    return "";
}

uint64_t paths_digest(const std::vector<xmc_path> &table) {
    Fnv f;
    f.word(0x786d632d70747331ull);  // "xmc-pts1": format tag
    f.word(table.size());
    for (xmc_path p : table) f.word(uint64_t(p));
    return f.h;
}

uint64_t fnv_bytes(uint64_t h, const void *p, size_t n) {
    const auto *b = static_cast<const unsigned char *>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

}  // namespace

std::string path_name(int32_t p) {
    switch (p) {
    case XMC_PATH_AUTO: return "auto";
    case XMC_PATH_DIRECT: return "direct";
    case XMC_PATH_IPC: return "ipc";
    case XMC_PATH_NCCL: return "nccl";
    case XMC_PATH_STAGED: return "staged";
    default: return "path " + to_string(p);
    }
}

uint64_t random_nonce() {
    // Seeded once per thread: a std::random_device per call opens and reads the kernel's source,
    // which took 8 of a prepared run's 29 us on the H200 (2026-12-06).
    thread_local std::mt19937_64 gen{(uint64_t(std::random_device{}()) << 32) ^ std::random_device{}()};
    return gen();
}

uint64_t process_token() {
    static const uint64_t token = [] {
        std::random_device rd;
        return (uint64_t(rd()) << 32 ^ rd()) ^ (uint64_t(::getpid()) << 17);
    }();
    return token;
}

uint64_t node_token() {
    static const uint64_t token = [] {
        uint64_t h = 0xcbf29ce484222325ull;
        char boot[64] = {};
        if (int fd = ::open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC); fd >= 0) {
            const ssize_t k = ::read(fd, boot, sizeof boot - 1);
            ::close(fd);
            if (k > 0) h = fnv_bytes(h, boot, size_t(k));
        }
        char host[256] = {};
        if (::gethostname(host, sizeof host - 1) == 0) h = fnv_bytes(h, host, std::strlen(host));
        return h;
    }();
    return token;
}

xmc_path choose_path(const PathOffer &from, const PathOffer &to, int32_t from_label, int32_t to_label,
                     std::string *why) {
    const bool same_process = from.process == to.process, same_node = from.node == to.node;
    auto fits = [&](xmc_path p, std::string *not_why) {
        if (!(from.can & path_bit(p))) return *not_why = "rank " + to_string(from_label) + " cannot take path " + path_name(p), false;
        if (!(to.can & path_bit(p))) return *not_why = "rank " + to_string(to_label) + " cannot take path " + path_name(p), false;
        if (p == XMC_PATH_DIRECT && !same_process)
            return *not_why = "path direct needs one address space, and ranks " + to_string(from_label) + " and " +
                              to_string(to_label) + " are in two processes", false;
        if (p == XMC_PATH_IPC && (same_process || !same_node))
            return *not_why = "path ipc is for two processes of one node, and ranks " + to_string(from_label) + " and " +
                              to_string(to_label) + (same_process ? " share a process" : " are on two nodes"), false;
        return true;
    };
    if (from.forced != XMC_PATH_AUTO) {
        if (from.forced <= XMC_PATH_AUTO || from.forced >= XMC_PATH_COUNT_) {
            *why = "rank " + to_string(from_label) + " forces " + path_name(from.forced) + ", which is no path";
            return XMC_PATH_AUTO;
        }
        std::string not_why;
        if (fits(xmc_path(from.forced), &not_why)) return xmc_path(from.forced);
        *why = "rank " + to_string(from_label) + " forces path " + path_name(from.forced) + " to rank " +
               to_string(to_label) + ", which they cannot take: " + not_why;
        return XMC_PATH_AUTO;
    }
    std::string not_why;
    for (xmc_path p : {XMC_PATH_DIRECT, XMC_PATH_IPC, XMC_PATH_NCCL, XMC_PATH_STAGED})
        if (fits(p, &not_why)) return p;
    *why = "no data path fits ranks " + to_string(from_label) + " and " + to_string(to_label) + ": " + not_why;
    return XMC_PATH_AUTO;
}

bool next(int64_t *idx, const int64_t *ext, int m) {
    for (int d = m - 1; d >= 0; --d) {
        if (++idx[d] < ext[d]) return true;
        idx[d] = 0;
    }
    return false;
}

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

bool shard_numel(int ndim, const int64_t *shape, int64_t *n) {
    *n = 1;
    for (int d = 0; d < ndim; ++d)
        if (shape[d] < 0 || __builtin_mul_overflow(*n, shape[d], n)) return false;
    return true;
}

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

namespace {

// AFF-MAP-FLAT: a segment that addresses the shard with its own strides (a piece of a flat shard:
// element i at shard element offset + sum(i[d] * strides[d])), on a buffer whose shard elements
// are evenly spaced (every 1-D buffer): shard element k at b.offset + k * step.
std::string place_run(const xmc_segment &s, int64_t offset, const int64_t *strides, const xmc_shard_buffer &b,
                      int64_t numel, View *v) {
    // The storage stride of one shard element: the innermost axis longer than 1 sets it, and every
    // other such axis must be that times its row-major stride.
    int64_t step = 0, row = 1;
    for (int d = b.ndim; d-- > 0;) {
        if (b.shape[d] <= 1) continue;
        if (step == 0) step = b.strides[d];
        int64_t want = 0;
        if (__builtin_mul_overflow(step, row, &want) || b.strides[d] != want)
            return "addresses its shard as a run of elements, and the buffer's elements are not evenly spaced";
        row *= b.shape[d];  // (at most the shard's element count)
    }
    int64_t lo = offset, hi = offset;  // the shard elements the box reaches
    for (int d = 0; d < s.ndim; ++d) {
        int64_t reach = 0;
        if (s.extents[d] > 1 && strides[d] == 0) return "has stride 0 on axis " + to_string(d);
        if (__builtin_mul_overflow(s.extents[d] - 1, strides[d], &reach) ||
            (reach < 0 ? __builtin_add_overflow(lo, reach, &lo) : __builtin_add_overflow(hi, reach, &hi)))
            return "has offsets that overflow";
    }
    if (lo < 0 || hi >= numel) return "leaves its shard of " + to_string(numel) + " elements";
    // Distinct elements: by |stride|, each axis steps past what the faster ones reach (as a target's
    // buffer must; a box from the planner always does).
    std::vector<std::pair<int64_t, int64_t>> axes;
    for (int d = 0; d < s.ndim; ++d)
        if (s.extents[d] > 1) axes.emplace_back(strides[d] < 0 ? -strides[d] : strides[d], s.extents[d]);
    std::sort(axes.begin(), axes.end());
    int64_t reached = 0;
    for (auto [stride, size] : axes) {
        if (stride <= reached) return "has strides that make its elements share shard elements";
        reached += stride * (size - 1);  // (within hi - lo: no overflow)
    }
    v->ndim = s.ndim;
    v->base = b.offset + offset * step;
    for (int d = 0; d < s.ndim; ++d) {
        v->ext[d] = s.extents[d];
        v->stride[d] = strides[d] * step;
    }
    return "";
}

}  // namespace

// AFF-EXEC-EXACT: a segment's box on the buffer's own strides and offset.
std::string place(const xmc_segment &s, int64_t offset, const int64_t *strides, const xmc_shard_buffer &b,
                  View *v) {
    int64_t numel = 0;
    shard_numel(b.ndim, b.shape, &numel);
    if (offset < 0 || offset >= numel) return "starts at element " + to_string(offset) + ", outside its shard";
    // AFF-MAP-FLAT: a segment with other dims than its shard, or other strides than the shard's
    // row-major ones, addresses the shard as a run of elements (a piece of a flat shard).
    bool box = b.ndim == s.ndim;
    int64_t rm = 1;  // the shard's row-major stride of axis d
    for (int d = s.ndim; box && d-- > 0;) {
        if (s.extents[d] > 1 && strides[d] != rm) box = false;
        rm *= b.shape[d];  // (at most the shard's element count)
    }
    if (!box) return place_run(s, offset, strides, b, numel, v);
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

xmc_status transport_status(int rc) {
    return rc == 0 ? XMC_OK : rc == XMC_ERR_TIMEOUT ? XMC_ERR_TIMEOUT : XMC_ERR_PEER_FAILED;
}

namespace {

// The bytes of one side of a peer's segments (a list of views), in plan order, as contiguous runs:
// at() is the byte offset (from the buffer's pointer) of the first byte of the current run not
// taken yet, left() how many of its bytes are left. Every view holds at least one element.
class Runs {
public:
    Runs(const std::vector<View> &views, size_t elem) : views_(views), elem_(elem) { start_view(); }
    bool done() const { return view_ == views_.size(); }
    int64_t at() const { return (run_ + k_ * v_.stride[v_.ndim - 1]) * int64_t(elem_) + int64_t(taken_); }
    size_t left() const { return run_len_ - taken_; }
    // True at a view's first byte: a new segment starts.
    bool view_start() const { return first_run_ && taken_ == 0; }
    void take(size_t n) {
        taken_ += n;
        if (taken_ == run_len_) next_run();
    }

private:
    void start_view() {
        if (done()) return;
        v_ = views_[view_];
        simplify(v_, nullptr);
        if (v_.ndim == 0) v_.ndim = 1, v_.ext[0] = 1, v_.stride[0] = 1;  // one element
        std::fill(idx_, idx_ + XMC_MAX_DIMS, 0);
        dense_ = v_.stride[v_.ndim - 1] == 1;
        first_run_ = true;
        load_run();
    }
    // Runs of a view: one per index of the outer axes, the inner axis whole when it is dense, else
    // one element at a time (k_).
    void load_run() {
        const int n = v_.ndim;
        run_ = v_.base;
        for (int d = 0; d + 1 < n; ++d) run_ += idx_[d] * v_.stride[d];
        k_ = 0;
        run_len_ = (dense_ ? size_t(v_.ext[n - 1]) : size_t(1)) * elem_;
        taken_ = 0;
    }
    void next_run() {
        first_run_ = false;
        if (!dense_ && k_ + 1 < v_.ext[v_.ndim - 1]) {
            ++k_;
            taken_ = 0;
        } else if (next(idx_, v_.ext, v_.ndim - 1)) {
            load_run();
        } else {
            ++view_;
            start_view();
        }
    }

    const std::vector<View> &views_;
    const size_t elem_;
    size_t view_ = 0;
    View v_;
    int64_t idx_[XMC_MAX_DIMS] = {};
    bool dense_ = true, first_run_ = true;
    int64_t run_ = 0, k_ = 0;  // the run's first element; for a strided inner axis, the element in it
    size_t run_len_ = 0, taken_ = 0;
};

// One direction of a pair exchange: the chunks to or from peer p, one at a time.
struct Direction {
    Direction(const xmc_transfer_args &a, Work &w, int p, uint64_t tag, xmc_transfer_stats &st, Stager &sg,
              bool incoming)
        : tp(*a.group->transport), p(p), tag(tag), st(st), sg(sg), incoming(incoming),
          runs(incoming ? w.in[size_t(p)] : w.out[size_t(p)], a.elem_size),
          left(incoming ? w.in_bytes[size_t(p)] : w.out_bytes[size_t(p)]),
          cap(std::min<uint64_t>(a.staging_budget, left)) {}

    bool done() const { return left == 0; }
    size_t next_chunk() const { return size_t(std::min(cap, left)); }
    // A piece of a segment starts in this chunk (statistics: chunks).
    void count_piece(bool chunk_start) {
        if (chunk_start || runs.view_start()) st.chunks += 1;
    }

    // Outgoing: makes the next chunk ready to send: the source itself, or packed into the arena.
    xmc_status pack() {
        const size_t chunk = next_chunk();
        count_piece(true);
        if (runs.left() >= chunk) {
            if (const char *direct = sg.source_bytes(runs.at(), chunk)) {
                ready = direct, staged = false;
                runs.take(chunk);
                return XMC_OK;
            }
        }
        char *arena = sg.arena(false);
        for (size_t used = 0; used < chunk;) {
            if (used > 0) count_piece(false);
            const size_t n = std::min(runs.left(), chunk - used);
            if (xmc_status s = sg.pack(arena + used, runs.at(), n); s != XMC_OK) return s;
            runs.take(n);
            used += n;
        }
        ready = arena, staged = true;
        return sg.packed();
    }
    xmc_status send() {
        const size_t chunk = next_chunk();
        if (int rc = tp.send(tp.ctx, p, ready, chunk, tag++)) return transport_status(rc);
        account(chunk);
        return XMC_OK;
    }

    // Incoming: receives the next chunk, into the target itself or into the arena (unpack() then
    // copies it to the target).
    xmc_status recv() {
        char *to = recv_at();
        if (int rc = tp.recv(tp.ctx, p, to, next_chunk(), tag++)) return transport_status(rc);
        received();
        return XMC_OK;
    }
    // Where the next chunk is to be received: the target itself, or the arena.
    char *recv_at() {
        const size_t chunk = next_chunk();
        char *to = nullptr;
        if (runs.left() >= chunk) to = sg.target_bytes(runs.at(), chunk);
        staged = to == nullptr;
        if (staged) to = sg.arena(true);
        return to;
    }
    // The chunk recv_at() named has arrived.
    void received() {
        const size_t chunk = next_chunk();
        if (!staged) {
            count_piece(true);
            runs.take(chunk);
        }
        pending = staged ? chunk : 0;
        account(chunk);
    }
    xmc_status unpack() {
        if (pending == 0) return XMC_OK;
        const char *arena = sg.arena(true);
        for (size_t used = 0; used < pending;) {
            count_piece(used == 0);
            const size_t n = std::min(runs.left(), pending - used);
            if (xmc_status s = sg.unpack(runs.at(), arena + used, n); s != XMC_OK) return s;
            runs.take(n);
            used += n;
        }
        pending = 0;
        return sg.unpacked();
    }

    void account(size_t chunk) {
        // AFF-ACCOUNT: bytes as they cross, each chunk once, the last one short;
        // AFF-STAGING: one round per message; the peak of what went through staging.
        left -= chunk;
        (incoming ? st.bytes_received : st.bytes_sent) += chunk;
        st.rounds += 1;
        if (staged) st.staging_peak = std::max<uint64_t>(st.staging_peak, chunk);
    }

    const xmc_transport &tp;
    const int p;
    uint64_t tag;  // of the next message
    xmc_transfer_stats &st;
    Stager &sg;
    const bool incoming;
    Runs runs;
    uint64_t left;     // bytes not sent or received yet
    const uint64_t cap;
    const char *ready = nullptr;  // outgoing: the packed chunk
    bool staged = false;          // the current chunk goes through the arena
    size_t pending = 0;           // incoming: bytes in the arena not unpacked yet
};

}  // namespace

xmc_status exchange_with(const xmc_transfer_args &a, Work &w, int p, uint64_t tag, xmc_transfer_stats &st,
                         Stager &sg) {
    Direction out(a, w, p, tag, st, sg, false), in(a, w, p, tag, st, sg, true);
    // AFF-NO-HANG: one end sends while the other receives: blocking sends cannot deadlock.
    const bool lower = w.me < p;
    xmc_status s = XMC_OK;
    while (s == XMC_OK && !(out.done() && in.done())) {
        const bool sending = !out.done(), receiving = !in.done();
        if (sending) s = out.pack();
        if (lower) {
            if (s == XMC_OK && sending) s = out.send();
            if (s == XMC_OK && receiving) s = in.recv();
        } else {
            if (s == XMC_OK && receiving) s = in.recv();
            if (s == XMC_OK && sending) s = out.send();
        }
        if (s == XMC_OK) s = in.unpack();
    }
    return s;
}

xmc_status exchange_rounds_with(const xmc_transfer_args &a, Work &w, int p, xmc_transfer_stats &st, Stager &sg,
                                Rounds &r) {
    Direction out(a, w, p, 0, st, sg, false), in(a, w, p, 0, st, sg, true);
    xmc_status s = XMC_OK;
    while (s == XMC_OK && !(out.done() && in.done())) {
        const size_t n_out = out.done() ? 0 : out.next_chunk(), n_in = in.done() ? 0 : in.next_chunk();
        if (n_out) s = out.pack();
        char *to = n_in ? in.recv_at() : nullptr;
        if (s == XMC_OK) s = r.round(p, n_out ? out.ready : nullptr, n_out, to, n_in);
        if (s != XMC_OK) break;
        if (n_out) out.account(n_out);
        if (n_in) in.received();
        s = in.unpack();
    }
    return s;
}

namespace {
// AFF-AGREE: plan, element size, budget and group: ranks differing in any of them all refuse.
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
    // AFF-LAYOUT, AFF-AGREE: the layouts the plan was made for (from ABI 0.2 callers).
    if (a.struct_size >= sizeof(xmc_transfer_args) && a.layouts) {
        f.word(a.layout_count);
        for (size_t i = 0; i < a.layout_count; ++i) {
            const xmc_plan_layout &l = a.layouts[i];
            f.word(uint64_t(int64_t(l.rank)));
            f.word(l.elem_size);
            for (const xmc_shard_layout *side : {&l.source, &l.target}) {
                const int nd = std::clamp(side->ndim, 0, XMC_MAX_DIMS);
                for (int64_t x : {int64_t(side->present), int64_t(side->kind), int64_t(side->ndim), side->offset})
                    f.word(uint64_t(x));
                for (int d = 0; d < nd; ++d) {
                    f.word(uint64_t(side->shape[d]));
                    f.word(uint64_t(side->strides[d]));
                }
            }
        }
    }
    return f.h;
}

} // namespace

// Step 3's reference: the table every rank computes alike, and its digest.
static std::string own_paths(const xmc_transfer_args &a, const std::vector<PathOffer> &offers, Work &w,
                             const std::string why_not[XMC_PATH_COUNT_], uint64_t *digest) {
    const std::string why = path_table(a, offers, w, why_not);
    *digest = paths_digest(w.table);
    return why;
}

const Steps &reference_steps() {
    static const Steps s{transfer_digest,    own_paths,           prepared_stale,  prepared_source_moved,
                         prepared_run_agree, prepared_run_stream, prepared_release};
    return s;
}

Steps &steps() {
    static Steps s = reference_steps();
    return s;
}

xmc_status agree(xmc_instance *inst, const xmc_transfer_args *args, xmc_transfer_stats *stats, Executor &ex,
                 xmc_transfer_args &a, Work &w, Agreed &out) {
    // Step 1: without a usable group no peer can be told, so these fail here alone.
    if (!args || !stats) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, kCall, "%s: NULL args or stats", kCall);
    *stats = xmc_transfer_stats{};
    // ABI 0.2 appended members: a caller of ABI version 1 gives exactly the old structure (the new
    // members then read as zero: no forced path, no report, no layouts); any other size below the
    // whole structure cuts a member.
    if (args->struct_size != XMC_TRANSFER_ARGS_SIZE_V1 && args->struct_size < sizeof(xmc_transfer_args))
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, kCall, "%s: struct_size %u is neither %zu (ABI 1) nor >= %zu",
                        kCall, args->struct_size, size_t(XMC_TRANSFER_ARGS_SIZE_V1), sizeof(xmc_transfer_args));
    a = xmc_transfer_args{};
    std::memcpy(&a, args, std::min<size_t>(args->struct_size, sizeof a));
    a.struct_size = args->struct_size < sizeof a ? args->struct_size : uint32_t(sizeof a);
    // AFF-PATH: a forced path outside the enum is no request at all.
    if (a.path < XMC_PATH_AUTO || a.path >= XMC_PATH_COUNT_)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, kCall, "%s: path %d is no xmc_path", kCall, int(a.path));
    const xmc_group *g = a.group;
    if (!g || !g->ranks || g->size < 1 || g->my_index < 0 || g->my_index >= g->size || !g->transport ||
        !g->transport->send || !g->transport->recv || !g->transport->all_gather)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, kCall,
                        "%s: the group needs ranks, 0 <= my_index < size and a transport with send, recv and "
                        "all_gather", kCall);
    if (g->timeout_ms == 0)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, kCall,
                        "%s: group timeout_ms is 0; a transfer must be bounded (AFF-NO-HANG)", kCall);
    // AFF-GROUP: ranks are the group's own labels, whatever world it came from.
    for (int i = 0; i < g->size; ++i)
        for (int j = -1; j < i; ++j)  // j == -1: the label itself (a group of one has no pair)
            if (g->ranks[i] < 0 || (j >= 0 && g->ranks[i] == g->ranks[j]))
                return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, kCall,
                                "%s: group rank labels must be distinct and >= 0 (position %d is %d)", kCall, i,
                                g->ranks[i]);
    const xmc_transport &tp = *g->transport;
    const char *tp_name = tp.name ? tp.name : "?";
    const int32_t my_label = g->ranks[g->my_index];
    // AFF-PATH: the report starts as "no path" for every position.
    if (a.peer_paths) std::fill(a.peer_paths, a.peer_paths + g->size, XMC_PATH_AUTO);

    try {
        // Step 2.
        w = Work{};
        std::string why = check_request(a, w, ex);
        if (why.empty()) why = check_layout(a, a.layouts, a.layout_count);
        w.local_bytes = local_bytes(w, a.elem_size);

        // Step 3: offers (AFF-PATH). Every rank offers, refused or not, so that every rank takes
        // part in every gather of the call.
        std::string why_not[XMC_PATH_COUNT_];
        PathOffer offer{};
        offer.magic = kOfferMagic;
        offer.process = process_token();
        offer.node = node_token();
        offer.index = g->my_index;
        offer.forced = int32_t(a.path);
        offer.can = why.empty() ? ex.paths(a, why_not, &w.native) : 0;
        offer.refused = why.empty() ? 0 : 1;
        std::vector<PathOffer> offers(size_t(g->size));
        xmc_status s = transport_status(tp.all_gather(tp.ctx, &offer, offers.data(), sizeof offer, g->timeout_ms));
        if (s != XMC_OK)
            return be::fail(inst, s, 0, kCall, "%s: rank %d: offering data paths over transport '%s' failed: %s within %u ms",
                            kCall, my_label, tp_name, xmc_status_string(s), g->timeout_ms);
        bool peer_refuses = false;  // then its vote says why, and no path table is needed
        for (int k = 0; k < g->size && why.empty(); ++k) {
            if (offers[size_t(k)].magic != kOfferMagic || offers[size_t(k)].index != k)
                why = "the rank at group position " + to_string(k) + " offered no data paths this executor reads";
            peer_refuses = peer_refuses || offers[size_t(k)].refused;
        }
        uint64_t table_digest = paths_digest(w.table);  // (an empty table where a rank refuses)
        if (why.empty() && !peer_refuses) why = steps().paths(a, offers, w, why_not, &table_digest);
        if (why.empty() && !peer_refuses) {
            w.path.assign(size_t(g->size), XMC_PATH_AUTO);
            for (int p = 0; p < g->size; ++p) w.path[size_t(p)] = w.table[size_t(w.me) * size_t(g->size) + size_t(p)];
            if (a.peer_paths) std::copy(w.path.begin(), w.path.end(), a.peer_paths);
        }

        // AFF-AGREE, AFF-REFUSE-BEFORE-WRITE: all ranks vote, refused or not, before any writes.
        // Step 4: agreement. The nonces make this call's message tags differ from any earlier call's.
        TransferVote mine{};
        mine.digest = steps().digest(a);
        mine.nonce = random_nonce();
        mine.paths = table_digest;
        mine.index = g->my_index;
        mine.label = my_label;
        mine.refused = why.empty() ? 0 : 1;
        set_reason(mine, why);
        std::vector<TransferVote> votes(size_t(g->size));
        s = transport_status(tp.all_gather(tp.ctx, &mine, votes.data(), sizeof mine, g->timeout_ms));
        if (s != XMC_OK)
            return be::fail(inst, s, 0, kCall, "%s: rank %d: the agreement over transport '%s' failed: %s within %u ms",
                            kCall, my_label, tp_name, xmc_status_string(s), g->timeout_ms);
        if (!why.empty() && w.native != 0)
            return be::fail(inst, XMC_ERR_DRIVER, w.native, kCall, "%s: rank %d: %s", kCall, my_label, why.c_str());
        if (!why.empty())
            return be::fail(inst, XMC_ERR_REFUSED, 0, kCall, "%s: rank %d refused: %s", kCall, my_label, why.c_str());
        Fnv call;
        for (int k = 0; k < g->size; ++k) {
            const TransferVote &v = votes[size_t(k)];
            if (v.refused)
                return be::fail(inst, XMC_ERR_REFUSED, 0, kCall, "%s: refused because rank %d refused: %.156s", kCall,
                                v.label, v.reason);
            if (v.index != k)
                return be::fail(inst, XMC_ERR_REFUSED, 0, kCall,
                                "%s: refused: the rank at group position %d believes it is at position %d", kCall, k,
                                v.index);
            // AFF-AGREE: a rank whose request differs makes every rank refuse.
            if (v.digest != votes[0].digest)
                return be::fail(inst, XMC_ERR_REFUSED, 0, kCall,
                                "%s: refused: rank %d's request differs from rank %d's (plan, layouts, element size, "
                                "budget or group)", kCall, v.label, votes[0].label);
            // AFF-PATH: so does a rank that computed other data paths (another rule, another build).
            if (v.paths != votes[0].paths)
                return be::fail(inst, XMC_ERR_REFUSED, 0, kCall,
                                "%s: refused: rank %d's data paths differ from rank %d's for the same offers", kCall,
                                v.label, votes[0].label);
            call.word(v.nonce);
        }
        out.digest = mine.digest;
        out.paths = mine.paths;
        out.call = call.h;
        out.one_node = true;
        for (const PathOffer &o : offers) out.one_node = out.one_node && o.node == offers[0].node;
        return XMC_OK;
    } catch (const std::bad_alloc &) {
        return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, 0, kCall, "%s: rank %d: out of host memory", kCall, my_label);
    }
}

xmc_status finish(xmc_instance *inst, const xmc_transfer_args &a, Work &w, Executor &ex, uint64_t call,
                  const Agreed &agreed, xmc_transfer_stats *stats) {
    const xmc_group *g = a.group;
    const xmc_transport &tp = *g->transport;
    const char *tp_name = tp.name ? tp.name : "?";
    const int32_t my_label = g->ranks[g->my_index];
    try {
        std::vector<TransferVote> votes(size_t(g->size));
        // Step 5. Tags: the call's id in the high half, the chunk number in the low half.
        xmc_status s = ex.move(a, w, call << 32, *stats);
        // AFF-ACCOUNT: the segments this rank read or wrote.
        stats->segments = w.segments;
        // A backend's own failure (a driver call, not the transport) keeps its detail and code.
        xmc_error_info own{};
        const bool backend_failed = s != XMC_OK && s != XMC_ERR_TIMEOUT && s != XMC_ERR_PEER_FAILED;
        if (backend_failed) be::last_error(inst, &own);
        // Step 6 (AFF-RESULT): success only with every byte of the plan moved.
        std::string short_by;
        if (s == XMC_OK) {
            uint64_t out = 0, in = 0;
            for (int p = 0; p < g->size; ++p) out += w.out_bytes[size_t(p)], in += w.in_bytes[size_t(p)];
            if (stats->bytes_received != in || stats->bytes_sent != out || stats->bytes_copied_locally != w.local_bytes)
                short_by = "rank " + to_string(my_label) + " moved " + to_string(stats->bytes_received) + " B in, " +
                           to_string(stats->bytes_sent) + " B out and " + to_string(stats->bytes_copied_locally) +
                           " B locally; the plan moves " + to_string(in) + ", " + to_string(out) + " and " +
                           to_string(w.local_bytes);
        }

        // AFF-NO-HANG: a failure on one rank reaches every rank, in a bounded vote.
        // Step 7: every rank learns whether every rank succeeded.
        TransferVote done{};
        done.digest = agreed.digest;
        done.paths = agreed.paths;
        done.index = g->my_index;
        done.label = my_label;
        done.refused = s == XMC_OK && short_by.empty() ? 0 : 1;
        done.native = backend_failed ? own.native_code : 0;
        set_reason(done, s == XMC_OK       ? short_by
                         : backend_failed ? std::string(own.message)
                                          : std::string("transport ") + xmc_status_string(s));
        const xmc_status gs = transport_status(tp.all_gather(tp.ctx, &done, votes.data(), sizeof done, g->timeout_ms));
        if (backend_failed)
            return be::fail(inst, s, own.native_code, kCall, "%s: rank %d: moving data failed: %.300s", kCall,
                            my_label, own.message);
        // AFF-NO-HANG: a rank that timed out waiting for a peer whose own call failed (an NCCL
        // peer cannot tell it) reports that failure, with the peer's native code.
        if (s != XMC_OK && gs == XMC_OK)
            for (const TransferVote &v : votes)
                if (v.refused && v.native != 0 && v.label != my_label)
                    return be::fail(inst, XMC_ERR_PEER_FAILED, v.native, kCall,
                                    "%s: rank %d: moving data failed (%s) because rank %d failed: %.156s", kCall,
                                    my_label, xmc_status_string(s), v.label, v.reason);
        if (s != XMC_OK)
            return be::fail(inst, s, 0, kCall, "%s: rank %d: moving data over transport '%s' failed: %s", kCall,
                            my_label, tp_name, xmc_status_string(s));
        if (!short_by.empty())
            return be::fail(inst, XMC_ERR_PEER_FAILED, 0, kCall, "%s: %s", kCall, short_by.c_str());
        if (gs != XMC_OK)
            return be::fail(inst, gs, 0, kCall, "%s: rank %d: the completion vote over transport '%s' failed: %s",
                            kCall, my_label, tp_name, xmc_status_string(gs));
        // AFF-NO-HANG: a peer's failure reaches this rank with the peer's native code.
        for (const TransferVote &v : votes)
            if (v.refused)
                return be::fail(inst, XMC_ERR_PEER_FAILED, v.native, kCall, "%s: rank %d failed: %.156s", kCall,
                                v.label, v.reason);
        return be::ok();
    } catch (const std::bad_alloc &) {
        return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, 0, kCall, "%s: rank %d: out of host memory", kCall, my_label);
    }
}


xmc_status execute(xmc_instance *inst, const xmc_transfer_args *args, xmc_transfer_stats *stats, Executor &ex) {
    xmc_transfer_args a;
    Work w;
    Agreed agreed{};
    if (xmc_status s = agree(inst, args, stats, ex, a, w, agreed); s != XMC_OK) return s;
    return finish(inst, a, w, ex, agreed.call, agreed, stats);
}

}  // namespace xmc::transfer
