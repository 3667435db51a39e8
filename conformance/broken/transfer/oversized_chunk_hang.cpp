// xmc-selftest: fails AFF-NO-HANG
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug: a large staged chunk (4 KiB or more) leaves with a 64-byte checksum trailer that the budget
// does not count, so the message is larger than the receive the peer posts and the peer refuses it.
// The sender then waits for the peer's acknowledgement of the chunk (credit-based flow control)
// without a bound, "because a large chunk may take long to drain". The receiver has refused and
// moved on; the sender waits forever.
#include "transport_wrap.hpp"

#include <cstdint>
#include <vector>

namespace xmc::broken {
namespace {
constexpr size_t kLarge = 4096, kTrailer = 64;
constexpr uint64_t kAck = uint64_t{1} << 55;  // acknowledgements' tags

struct TrailerAndCredit : WrappedTransport {
    int send(int32_t peer, const void *buf, size_t bytes, uint64_t tag) override {
        if (bytes < kLarge) return WrappedTransport::send(peer, buf, bytes, tag);
        std::vector<char> msg(static_cast<const char *>(buf), static_cast<const char *>(buf) + bytes);
        msg.resize(bytes + kTrailer, 0);  // the checksum trailer
        if (int rc = WrappedTransport::send(peer, msg.data(), msg.size(), tag)) return rc;
        char ack = 0;
        int rc;
        while ((rc = WrappedTransport::recv(peer, &ack, 1, tag | kAck)) == XMC_ERR_TIMEOUT) {}  // unbounded
        return rc;
    }
    int recv(int32_t peer, void *buf, size_t bytes, uint64_t tag) override {
        const int rc = WrappedTransport::recv(peer, buf, bytes, tag);
        if (rc || bytes < kLarge) return rc;
        const char ack = 1;
        return WrappedTransport::send(peer, &ack, 1, tag | kAck);
    }
};
} // namespace

static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a) return host()->transfer_execute(inst, a, st);
    TrailerAndCredit w;
    return execute_over(inst, *a, st, w);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_oversized_chunk_hang")
