// Broken transfer executors whose bug lives in what the transport carries:
// the host executor run over a transport that forwards every call to the
// group's own, except the calls the bug overrides.
#pragma once
#include "broken.hpp"


namespace xmc::broken {

struct WrappedTransport {
    const xmc_transport *inner = nullptr;
    virtual ~WrappedTransport() = default;
    virtual int send(int32_t peer, const void *buf, size_t bytes, uint64_t tag) {
        return inner->send(inner->ctx, peer, buf, bytes, tag);
    }
    virtual int recv(int32_t peer, void *buf, size_t bytes, uint64_t tag) {
        return inner->recv(inner->ctx, peer, buf, bytes, tag);
    }
    virtual int all_gather(const void *in, void *out, size_t bytes, uint32_t timeout_ms) {
        return inner->all_gather(inner->ctx, in, out, bytes, timeout_ms);
    }
};

// The host's transfer of `args` over `w`, which wraps args.group's transport.
// A group without a whole transport goes to the host untouched, which refuses it.
inline xmc_status execute_over(xmc_instance *inst, xmc_transfer_args args, xmc_transfer_stats *st,
                               WrappedTransport &w) {
    if (!args.group || !args.group->transport || !whole_transport(*args.group->transport))
        return host()->transfer_execute(inst, &args, st);
    w.inner = args.group->transport;
    static constexpr auto send = [](void *c, int32_t p, const void *b, size_t n, uint64_t t) {
        return static_cast<WrappedTransport *>(c)->send(p, b, n, t);
    };
    static constexpr auto recv = [](void *c, int32_t p, void *b, size_t n, uint64_t t) {
        return static_cast<WrappedTransport *>(c)->recv(p, b, n, t);
    };
    static constexpr auto gather = [](void *c, const void *in, void *out, size_t n, uint32_t ms) {
        return static_cast<WrappedTransport *>(c)->all_gather(in, out, n, ms);
    };
    const xmc_transport tp{&w, send, recv, gather, w.inner->name};
    xmc_group g = *args.group;
    g.transport = &tp;
    args.group = &g;
    return host()->transfer_execute(inst, &args, st);
}

} // namespace xmc::broken
