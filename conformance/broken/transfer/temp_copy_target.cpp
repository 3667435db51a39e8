// xmc-selftest: fails AFF-EXEC-EXACT,AFF-MAP-FLAT,AFF-REFUSE-BEFORE-WRITE
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug: a non-contiguous target is written through a temporary. The executor
// writes into a zeroed dense copy of the target's extent and copies that whole extent back, so the
// memory between the target's elements is clobbered (AFF-EXEC-EXACT). The request is checked with
// the temporary as its target, so a target whose extent spans the source is not seen to overlap it:
// taken, and the copy back writes the source (AFF-REFUSE-BEFORE-WRITE). AFF-MAP-FLAT fails too: a flat target's
// padding between the runs written is clobbered the same way.
#include "broken.hpp"

#include <cstring>
#include <vector>

namespace xmc::broken {
static bool row_major_dense(const xmc_shard_buffer &b) {
    int64_t stride = 1;
    for (int d = b.ndim - 1; d >= 0; --d) {
        if (b.shape[d] > 1 && b.strides[d] != stride) return false;
        stride *= b.shape[d];
    }
    return true;
}

static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || !a->target.ptr || a->elem_size == 0 || a->target.ndim < 0 || a->target.ndim > XMC_MAX_DIMS ||
        row_major_dense(a->target))
        return host()->transfer_execute(inst, a, st);
    int64_t lo = a->target.offset, hi = a->target.offset;  // the extent the shard view reaches
    for (int d = 0; d < a->target.ndim; ++d) {
        if (a->target.shape[d] == 0) return host()->transfer_execute(inst, a, st);
        const int64_t r = (a->target.shape[d] - 1) * a->target.strides[d];
        (r < 0 ? lo : hi) += r;
    }
    std::vector<char> temp(a->target.capacity * a->elem_size, 0);
    xmc_transfer_args args = *a;
    args.target.ptr = temp.data();
    const xmc_status s = host()->transfer_execute(inst, &args, st);
    if (s == XMC_OK && lo >= 0)
        std::memcpy(static_cast<char *>(a->target.ptr) + lo * int64_t(a->elem_size), temp.data() + lo * int64_t(a->elem_size),
                    size_t(hi - lo + 1) * a->elem_size);
    return s;
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_temp_copy_target")
