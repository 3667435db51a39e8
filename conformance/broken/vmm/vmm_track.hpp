// What the broken slot backends of VMM-DOUBLE, VMM-BATCH-PARTIAL and VMM-ERROR-CLEAR need to
// know of the calls they wrap, whichever reference they wrap (host or CUDA): each slot's address
// and size, the slots of each request, which slots a wait has seen released, and the batch index
// a failed request names (" (batch index K)", reference/common/slot_book.hpp). Bookkeeping only:
// each bug file plants its own wrong step on top.
#pragma once
#include <xmc/backend.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <vector>

namespace xmc::broken_vmm {

struct Track {
    std::mutex mu;
    std::map<xmc_slot *, xmc_slot_info> slots;
    std::map<xmc_request *, std::vector<xmc_slot *>> requests;
    std::set<xmc_request *> remaps;
    std::set<xmc_slot *> released;  // a release of it was waited for, no remap asked since
};

inline Track &track() {
    static Track t;
    return t;
}

inline void created(xmc_slot *s, const xmc_slot_info &info) {
    std::lock_guard<std::mutex> lock(track().mu);
    track().slots[s] = info;
}

inline void asked(xmc_request *r, xmc_slot *const *s, size_t n, bool remap) {
    std::lock_guard<std::mutex> lock(track().mu);
    track().requests[r].assign(s, s + n);
    if (remap) {
        track().remaps.insert(r);
        for (size_t i = 0; i < n; ++i) track().released.erase(s[i]);
    }
}

// A wait of r succeeded: a release's slots are released now.
inline void waited(xmc_request *r) {
    std::lock_guard<std::mutex> lock(track().mu);
    if (track().remaps.count(r)) return;
    for (xmc_slot *s : track().requests[r]) track().released.insert(s);
}

inline bool is_released(xmc_slot *s) {
    std::lock_guard<std::mutex> lock(track().mu);
    return track().released.count(s) != 0;
}

inline void closed(xmc_slot *s) {
    std::lock_guard<std::mutex> lock(track().mu);
    track().released.erase(s);
    track().slots.erase(s);
}

// The slots of r (empty if unknown) and whether it is a remap.
inline std::vector<xmc_slot_info> slots_of(xmc_request *r, bool *remap) {
    std::lock_guard<std::mutex> lock(track().mu);
    std::vector<xmc_slot_info> v;
    for (xmc_slot *s : track().requests[r]) v.push_back(track().slots[s]);
    *remap = track().remaps.count(r) != 0;
    return v;
}

// The batch index the last error names, or -1.
inline long failed_index(const xmc_backend *api, xmc_instance *inst) {
    xmc_error_info e{};
    api->last_error(inst, &e);
    const char *p = std::strstr(e.message, "(batch index ");
    return p ? std::strtol(p + std::strlen("(batch index "), nullptr, 10) : -1;
}

// ---- wrappers that record, around the reference table ref() ------------------

inline const xmc_backend *&ref() {
    static const xmc_backend *r = nullptr;
    return r;
}

inline xmc_status rec_create(xmc_instance *inst, int32_t d, size_t n, xmc_slot **out, xmc_slot_info *info) {
    const xmc_status st = ref()->slot_create(inst, d, n, out, info);
    if (st == XMC_OK) created(*out, *info);
    return st;
}
inline xmc_status rec_release(xmc_instance *inst, xmc_slot *s, xmc_stream *on, xmc_request **out) {
    const xmc_status st = ref()->slot_release(inst, s, on, out);
    if (st == XMC_OK) asked(*out, &s, 1, false);
    return st;
}
inline xmc_status rec_release_batch(xmc_instance *inst, xmc_slot *const *s, size_t n, xmc_stream *on,
                                    xmc_request **out) {
    const xmc_status st = ref()->slot_release_batch(inst, s, n, on, out);
    if (st == XMC_OK) asked(*out, s, n, false);
    return st;
}
inline xmc_status rec_remap(xmc_instance *inst, xmc_slot *s, xmc_stream *on, const void *src, size_t n, uint32_t f,
                            xmc_request **out) {
    const xmc_status st = ref()->slot_remap(inst, s, on, src, n, f, out);
    if (st == XMC_OK) asked(*out, &s, 1, true);
    return st;
}
inline xmc_status rec_remap_batch(xmc_instance *inst, xmc_slot *const *s, size_t n, xmc_stream *on,
                                  const void *const *src, const size_t *b, uint32_t f, xmc_request **out) {
    const xmc_status st = ref()->slot_remap_batch(inst, s, n, on, src, b, f, out);
    if (st == XMC_OK) asked(*out, s, n, true);
    return st;
}
inline xmc_status rec_wait(xmc_instance *inst, xmc_request *r, uint32_t ms) {
    const xmc_status st = ref()->request_wait(inst, r, ms);
    if (st == XMC_OK) waited(r);
    return st;
}
inline xmc_status rec_close(xmc_instance *inst, xmc_slot *s) {
    const xmc_status st = ref()->slot_close(inst, s);
    if (st == XMC_OK) closed(s);
    return st;
}

// Installs the recording wrappers over `reference` in t; a bug file then replaces the entry its
// bug sits in, calling the rec_* of that entry for the reference's part.
inline void record_calls(xmc_backend &t, const xmc_backend *reference) {
    ref() = reference;
    t.slot_create = rec_create;
    t.slot_release = rec_release;
    t.slot_release_batch = rec_release_batch;
    t.slot_remap = rec_remap;
    t.slot_remap_batch = rec_remap_batch;
    t.request_wait = rec_wait;
    t.slot_close = rec_close;
}

// ---- a bug in what a failed request reports ------------------------------------------

// A wait that returned a worker's failure: the request, its slots, whether it is a remap, and
// the batch index its error names (-1: none).
struct Failed {
    xmc_request *r;
    std::vector<xmc_slot *> handles;
    std::vector<xmc_slot_info> slots;
    bool remap;
    long index;
};
using OnFail = xmc_status (*)(xmc_instance *inst, const Failed &f, xmc_status st);

inline OnFail &on_fail() {
    static OnFail f = nullptr;
    return f;
}

inline xmc_status wait_then(xmc_instance *inst, xmc_request *r, uint32_t ms) {
    const xmc_status st = rec_wait(inst, r, ms);
    if (st == XMC_OK || st == XMC_ERR_TIMEOUT) return st;
    Failed f{r, {}, {}, false, failed_index(ref(), inst)};
    f.slots = slots_of(r, &f.remap);
    {
        std::lock_guard<std::mutex> lock(track().mu);
        f.handles = track().requests[r];
    }
    return on_fail()(inst, f, st);
}

// record_calls, and request_wait runs `f` after each wait that returned a worker's failure
// (VMM-ASYNC-ERROR): the bug sits in what that failure leaves or reports.
inline void on_failed_wait(xmc_backend &t, const xmc_backend *reference, OnFail f) {
    record_calls(t, reference);
    on_fail() = f;
    t.request_wait = wait_then;
}

// What slot_create answered for s.
inline xmc_slot_info info_of(xmc_slot *s) {
    std::lock_guard<std::mutex> lock(track().mu);
    return track().slots[s];
}

// ---- captures: for a bug that acts only while a stream records a graph -------------------

struct Captures {
    std::mutex mu;
    std::set<std::pair<xmc_instance *, xmc_stream *>> on;  // graph_begin'd, not yet graph_end'd
};

inline Captures &captures() {
    static Captures c;
    return c;
}

inline bool is_capturing(xmc_instance *inst, xmc_stream *s) {
    std::lock_guard<std::mutex> lock(captures().mu);
    return captures().on.count({inst, s}) != 0;
}

// The instance's close: its streams go with it.
inline void forget_captures(xmc_instance *inst) {
    std::lock_guard<std::mutex> lock(captures().mu);
    for (auto it = captures().on.begin(); it != captures().on.end();)
        it = it->first == inst ? captures().on.erase(it) : ++it;
}

inline xmc_status cap_begin(xmc_instance *inst, xmc_stream *s) {
    const xmc_status st = ref()->graph_begin(inst, s);
    std::lock_guard<std::mutex> lock(captures().mu);
    if (st == XMC_OK) captures().on.insert({inst, s});
    return st;
}

inline xmc_status cap_end(xmc_instance *inst, xmc_stream *s, xmc_graph **out) {
    const xmc_status st = ref()->graph_end(inst, s, out);
    std::lock_guard<std::mutex> lock(captures().mu);
    if (st == XMC_OK) captures().on.erase({inst, s});
    return st;
}

// Installs graph_begin and graph_end over `reference`, noting which streams capture.
inline void track_captures(xmc_backend &t, const xmc_backend *reference) {
    ref() = reference;
    t.graph_begin = cap_begin;
    t.graph_end = cap_end;
}

} // namespace xmc::broken_vmm
