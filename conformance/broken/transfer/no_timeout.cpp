// xmc-selftest: fails AFF-NO-HANG,AFF-RESULT
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug: the executor waits for its peers without a bound. The agreement's all_gather gets no
// timeout, and a send or receive that times out is retried forever. A rank that never joins, or
// that fails, then hangs all the others (AFF-NO-HANG), and a peer whose messages never arrive
// leaves its receivers waiting instead of failing within the bound (AFF-RESULT).
#include "transport_wrap.hpp"

#include <cstdint>

namespace xmc::broken {
namespace {
struct Unbounded : WrappedTransport {
    int send(int32_t peer, const void *buf, size_t bytes, uint64_t tag) override {
        int rc;
        while ((rc = WrappedTransport::send(peer, buf, bytes, tag)) == XMC_ERR_TIMEOUT) {}
        return rc;
    }
    int recv(int32_t peer, void *buf, size_t bytes, uint64_t tag) override {
        int rc;
        while ((rc = WrappedTransport::recv(peer, buf, bytes, tag)) == XMC_ERR_TIMEOUT) {}
        return rc;
    }
    int all_gather(const void *in, void *out, size_t bytes, uint32_t) override {
        return WrappedTransport::all_gather(in, out, bytes, UINT32_MAX);  // "wait as long as it takes"
    }
};
} // namespace

static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a) return host()->transfer_execute(inst, a, st);
    Unbounded w;
    return execute_over(inst, *a, st, w);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_no_timeout")
