// xmc-selftest: fails AFF-NO-HANG
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug: a large staged chunk (4 KiB or more) leaves with a 64-byte checksum trailer that the budget
// does not count, so the message is larger than the receive the peer posts and the peer refuses it.
// The sender then waits for the peer's acknowledgement of the chunk (credit-based flow control)
// without a bound, "because a large chunk may take long to drain". The receiver has refused and
// moved on; the sender waits forever.
#include "broken.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

namespace xmc::broken {
namespace {
constexpr size_t kLarge = 4096, kTrailer = 64;
constexpr uint64_t kAck = uint64_t{1} << 55;  // acknowledgements' tags

struct Ctx {
    const xmc_transport *inner;
};
int send(void *c, int32_t peer, const void *buf, size_t bytes, uint64_t tag) {
    auto &x = *static_cast<Ctx *>(c);
    if (bytes < kLarge) return x.inner->send(x.inner->ctx, peer, buf, bytes, tag);
    std::vector<char> msg(static_cast<const char *>(buf), static_cast<const char *>(buf) + bytes);
    msg.resize(bytes + kTrailer, 0);  // the checksum trailer
    if (int rc = x.inner->send(x.inner->ctx, peer, msg.data(), msg.size(), tag)) return rc;
    char ack = 0;
    int rc;
    while ((rc = x.inner->recv(x.inner->ctx, peer, &ack, 1, tag | kAck)) == XMC_ERR_TIMEOUT) {}  // unbounded
    return rc;
}
int recv(void *c, int32_t peer, void *buf, size_t bytes, uint64_t tag) {
    auto &x = *static_cast<Ctx *>(c);
    const int rc = x.inner->recv(x.inner->ctx, peer, buf, bytes, tag);
    if (rc || bytes < kLarge) return rc;
    const char ack = 1;
    return x.inner->send(x.inner->ctx, peer, &ack, 1, tag | kAck);
}
int all_gather(void *c, const void *in, void *out, size_t bytes, uint32_t timeout_ms) {
    auto &x = *static_cast<Ctx *>(c);
    return x.inner->all_gather(x.inner->ctx, in, out, bytes, timeout_ms);
}
} // namespace

static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || !a->group || !a->group->transport || !whole_transport(*a->group->transport)) return host()->transfer_execute(inst, a, st);
    Ctx x{a->group->transport};
    xmc_transport tp{&x, send, recv, all_gather, x.inner->name};
    xmc_group g = *a->group;
    g.transport = &tp;
    xmc_transfer_args args = *a;
    args.group = &g;
    return host()->transfer_execute(inst, &args, st);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_oversized_chunk_hang")
