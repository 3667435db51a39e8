// The boundary classes of an address range (SPEC 6, "Checks find bugs by
// construction, not by luck"): every operation that takes a range (pin_query,
// reg_register's overlap, reg_unregister, slot_remap's source, a copy's
// extents, a transfer's buffers) is tested at each class, in fixed tests and
// in stateful generators biased toward them. One list of classes; the fixed
// tests cut their ranges from a pair of blocks with boundary_ranges(), the
// generators name what they reached with classify(), and BoundaryTally counts
// which classes each stateful sequence reached (reported where
// $XMC_BOUNDARY_REPORT names a file).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace xmc::conformance {

// X(name, label): the classes, in the order reports list them.
#define XMC_BOUNDARY_CLASSES(X)                                                                            \
    X(Inside, "inside")                  /* wholly inside one block, not reaching its end */              \
    X(EndsAtEnd, "ends_at_end")          /* inside one block, ending exactly at its end */                \
    X(OnePastEnd, "one_past_end")        /* starts inside a block, ends one unit past its end */           \
    X(IntoUnowned, "into_unowned")       /* reaches (or lies in) memory no block owns */                  \
    X(SpansAdjacent, "spans_adjacent")   /* covers parts of two blocks that touch */                      \
    X(SpansGap, "spans_gap")             /* covers parts of two blocks and unowned memory between them */ \
    X(ZeroLength, "zero_length")         /* no bytes at all */

enum class Boundary {
#define XMC_BOUNDARY_ENUM_(name, label) name,
    XMC_BOUNDARY_CLASSES(XMC_BOUNDARY_ENUM_)
#undef XMC_BOUNDARY_ENUM_
};
constexpr size_t kBoundaryClasses = 0
#define XMC_BOUNDARY_COUNT_(name, label) +1
    XMC_BOUNDARY_CLASSES(XMC_BOUNDARY_COUNT_)
#undef XMC_BOUNDARY_COUNT_
    ;

inline const char *boundary_name(Boundary b) {
    static const char *const names[] = {
#define XMC_BOUNDARY_NAME_(name, label) label,
        XMC_BOUNDARY_CLASSES(XMC_BOUNDARY_NAME_)
#undef XMC_BOUNDARY_NAME_
    };
    return names[static_cast<size_t>(b)];
}

inline std::vector<Boundary> all_boundaries() {
    std::vector<Boundary> v;
    for (size_t i = 0; i < kBoundaryClasses; ++i) v.push_back(static_cast<Boundary>(i));
    return v;
}

// A block of memory someone owns (a pinned block, a registration, an
// allocation, a buffer): [base, base + size).
struct Span {
    uintptr_t base = 0;
    size_t size = 0;
    uintptr_t end() const { return base + size; }
};

// One range of a class; `what` says how it was cut, for messages.
struct BoundaryRange {
    Boundary cls;
    uintptr_t addr;
    size_t len;
    const char *what;
};

// The ranges of every class that the pair (first, second) allows, in `unit`s
// (1 byte, or a page where the operation works on pages). `second` starts at
// or after first's end: exactly there (adjacent: the SpansAdjacent ranges) or
// after a gap no block owns (the SpansGap ranges, and ranges reaching into
// the gap). `unowned_after` units after second's end belong to no block (at
// least one). Each block holds at least three units. A pair gives SpansAdjacent
// or SpansGap, not both: the fixed tests ask for one pair of each where the
// platform can place them.
inline std::vector<BoundaryRange> boundary_ranges(Span first, Span second, size_t unowned_after, size_t unit = 1) {
    const uintptr_t u = unit;
    std::vector<BoundaryRange> v;
    const bool adjacent = second.base == first.end();
    const size_t gap = second.base - first.end();
    v.push_back({Boundary::Inside, first.base, first.size - u, "from the base, one unit short of the end"});
    v.push_back({Boundary::Inside, first.base + u, first.size - 2 * u, "strictly inside"});
    v.push_back({Boundary::EndsAtEnd, first.base, first.size, "the whole block"});
    v.push_back({Boundary::EndsAtEnd, second.base + u, second.size - u, "one unit in, to the end"});
    v.push_back({Boundary::OnePastEnd, second.base, second.size + u, "the whole block and one unit past it"});
    v.push_back({Boundary::OnePastEnd, second.end() - u, 2 * u, "the last unit and one past it"});
    v.push_back({Boundary::IntoUnowned, second.base + u, second.size - u + unowned_after * u,
                 "from inside to the end of the unowned memory after the block"});
    v.push_back({Boundary::IntoUnowned, second.end(), unowned_after * u, "wholly in the unowned memory after the block"});
    if (adjacent) {
        v.push_back({Boundary::SpansAdjacent, first.end() - u, 2 * u, "the last unit of one and the first of the next"});
        v.push_back({Boundary::SpansAdjacent, first.base, first.size + second.size, "two adjacent blocks whole"});
    } else {
        v.push_back({Boundary::IntoUnowned, second.base - u, 2 * u, "from the gap into the block"});
        v.push_back({Boundary::IntoUnowned, first.end() - u, gap + u, "from the last unit into the gap"});
        v.push_back({Boundary::SpansGap, first.end() - u, gap + 2 * u, "the last unit, the gap, the next block's first"});
        v.push_back({Boundary::SpansGap, first.base, second.end() - first.base, "two blocks and the gap, whole"});
    }
    v.push_back({Boundary::ZeroLength, first.base, 0, "zero length at the base"});
    v.push_back({Boundary::ZeroLength, first.base + u, 0, "zero length inside"});
    v.push_back({Boundary::ZeroLength, second.end(), 0, "zero length at the end"});
    return v;
}

// The class of [addr, addr + len) among `blocks` (disjoint), in `unit`s: the
// name of what a generated range reached, read from the real layout.
inline Boundary classify(uintptr_t addr, size_t len, const std::vector<Span> &blocks, size_t unit = 1) {
    if (len == 0) return Boundary::ZeroLength;
    const uintptr_t end = len > UINTPTR_MAX - addr ? UINTPTR_MAX : addr + len;
    std::vector<Span> touched;
    for (const Span &b : blocks)
        if (b.size && b.base < end && addr < b.end()) touched.push_back(b);
    if (touched.empty()) return Boundary::IntoUnowned;
    if (touched.size() == 1) {
        const Span &b = touched[0];
        if (addr >= b.base && end <= b.end()) return end == b.end() ? Boundary::EndsAtEnd : Boundary::Inside;
        if (addr >= b.base && end == b.end() + unit) return Boundary::OnePastEnd;
        return Boundary::IntoUnowned;
    }
    // Two or more: is there unowned memory between them?
    std::vector<Span> s = touched;
    for (size_t i = 1; i < s.size(); ++i)
        for (size_t j = i; j > 0 && s[j].base < s[j - 1].base; --j) std::swap(s[j], s[j - 1]);
    for (size_t i = 1; i < s.size(); ++i)
        if (s[i].base != s[i - 1].end()) return Boundary::SpansGap;
    return Boundary::SpansAdjacent;
}

// Which classes the commands of a stateful property reached: per sequence a
// bit per class, and per class the number of sequences that reached it (and
// the number of commands). check_stateful opens and closes each sequence and
// writes one line per property run to $XMC_BOUNDARY_REPORT, if set:
//   <property> <backend> sequences=<n> <class>=<sequences reaching it>/<commands> ...
// Off otherwise: the counting costs nothing the tests would notice.
struct BoundaryTally {
    std::array<bool, kBoundaryClasses> in_sequence{};
    std::array<uint64_t, kBoundaryClasses> sequences{};
    std::array<uint64_t, kBoundaryClasses> commands{};
    uint64_t runs = 0;
    bool used = false;  // a command of the property counted something

    void reach(Boundary b) {
        in_sequence[static_cast<size_t>(b)] = true;
        ++commands[static_cast<size_t>(b)];
        used = true;
    }
    void begin_sequence() { in_sequence.fill(false); }
    void end_sequence() {
        ++runs;
        for (size_t i = 0; i < kBoundaryClasses; ++i) sequences[i] += in_sequence[i];
    }
    void reset() { *this = BoundaryTally{}; }
    void report(const std::string &property, const std::string &backend) const {
        const char *path = std::getenv("XMC_BOUNDARY_REPORT");
        if (!path || !*path || !used) return;
        FILE *f = std::fopen(path, "a");
        if (!f) return;
        std::fprintf(f, "%s %s sequences=%llu", property.c_str(), backend.c_str(),
                     static_cast<unsigned long long>(runs));
        for (size_t i = 0; i < kBoundaryClasses; ++i)
            std::fprintf(f, " %s=%llu/%llu", boundary_name(static_cast<Boundary>(i)),
                         static_cast<unsigned long long>(sequences[i]), static_cast<unsigned long long>(commands[i]));
        std::fprintf(f, "\n");
        std::fclose(f);
    }
};

// The tally of the property running on this thread.
inline BoundaryTally &boundary_tally() {
    static thread_local BoundaryTally t;
    return t;
}

} // namespace xmc::conformance
