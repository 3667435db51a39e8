// xmc-selftest: fails VMM-DEFERRED
// xmc-selftest: filter VMM-*
// xmc-selftest: timeout 60
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 180
// Bug: a deferred copy can be launched twice for one slot; the
// second launch copies again (in the seed, after the first had released the
// source).
#include "broken.hpp"

#include <map>
#include <mutex>
#include <set>
#include <vector>

namespace xmc::broken {
namespace {
struct Copy {
    void *dst;
    const void *src;
    size_t bytes;
};
std::mutex mu;
std::map<xmc_slot *, xmc_slot_info> slots;
std::map<xmc_request *, std::vector<Copy>> remaps;
std::set<std::pair<xmc_request *, uint32_t>> launched;

void remember(xmc_request *r, xmc_slot *const *s, size_t n, const void *const *src) {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 0; i < n; ++i) remaps[r].push_back({slots[s[i]].address, src[i], slots[s[i]].size});
}
} // namespace

static xmc_status create(xmc_instance *inst, int32_t d, size_t n, xmc_slot **out, xmc_slot_info *info) {
    xmc_status st = host()->slot_create(inst, d, n, out, info);
    std::lock_guard<std::mutex> lock(mu);
    if (st == XMC_OK) slots[*out] = *info;
    return st;
}
static xmc_status remap(xmc_instance *inst, xmc_slot *s, xmc_stream *on, const void *src, size_t n, uint32_t f,
                        xmc_request **out) {
    xmc_status st = host()->slot_remap(inst, s, on, src, n, f, out);
    if (st == XMC_OK) remember(*out, &s, 1, &src);
    return st;
}
static xmc_status remap_batch(xmc_instance *inst, xmc_slot *const *s, size_t n, xmc_stream *on,
                              const void *const *src, const size_t *b, uint32_t f, xmc_request **out) {
    xmc_status st = host()->slot_remap_batch(inst, s, n, on, src, b, f, out);
    if (st == XMC_OK) remember(*out, s, n, src);
    return st;
}
static xmc_status launch(xmc_instance *inst, xmc_request *r, uint32_t i, xmc_stream *s) {
    xmc_status st = host()->request_launch_copy(inst, r, i, s);
    std::lock_guard<std::mutex> lock(mu);
    if (st == XMC_OK) launched.insert({r, i});
    if (st != XMC_ERR_BUSY || !launched.count({r, i})) return st;
    const Copy &c = remaps[r][i];  // launched before: copy again instead of refusing
    xmc_copy_desc d{};
    d.src = {const_cast<void *>(c.src), XMC_MEM_PINNED, 0, 0, 0, 0, c.bytes, c.bytes};
    d.dst = {c.dst, XMC_MEM_DEVICE, 0, 0, 0, 0, c.bytes, c.bytes};
    d.width_bytes = c.bytes;
    d.height = d.depth = 1;
    return host()->copy(inst, &d, s);
}
void plant(xmc_backend &t) {
    t.slot_create = create;
    t.slot_remap = remap;
    t.slot_remap_batch = remap_batch;
    t.request_launch_copy = launch;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_deferred_twice")
