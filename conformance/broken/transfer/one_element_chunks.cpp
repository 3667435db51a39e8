// xmc-selftest: fails AFF-STAGING
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug: chunking degenerates to one element per round, so a large 1-D segment
// takes as many rounds as it has elements. Here every staged chunk leaves as one message per element.
#include "transport_wrap.hpp"

#include <algorithm>

namespace xmc::broken {
namespace {
// One message per element: element k of a chunk goes under its own tag.
struct PerElement : WrappedTransport {
    size_t elem = 1;
    template <class Op>
    int per_element(size_t bytes, uint64_t tag, Op op) {
        for (size_t at = 0, k = 0; at < bytes; at += elem, ++k)
            if (int rc = op(at, std::min(elem, bytes - at), tag * 0x9e3779b97f4a7c15ull + k)) return rc;
        return 0;
    }
    int send(int32_t peer, const void *buf, size_t bytes, uint64_t tag) override {
        return per_element(bytes, tag, [&](size_t at, size_t n, uint64_t t) {
            return WrappedTransport::send(peer, static_cast<const char *>(buf) + at, n, t);
        });
    }
    int recv(int32_t peer, void *buf, size_t bytes, uint64_t tag) override {
        return per_element(bytes, tag, [&](size_t at, size_t n, uint64_t t) {
            return WrappedTransport::recv(peer, static_cast<char *>(buf) + at, n, t);
        });
    }
};
} // namespace

static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || a->elem_size == 0) return host()->transfer_execute(inst, a, st);
    PerElement w;
    w.elem = a->elem_size;
    return execute_over(inst, *a, st, w);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_one_element_chunks")
