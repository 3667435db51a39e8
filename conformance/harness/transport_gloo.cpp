#include "transport_gloo.hpp"

#include <gloo/allgather.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

namespace xmc::conformance {

namespace {

// Point-to-point messages use slots whose top byte no gloo collective uses (theirs are small).
uint64_t p2p_slot(uint64_t tag) { return (uint64_t{0xFE} << 56) | (tag & ((uint64_t{1} << 56) - 1)); }

// gloo reports a bound that ran out, and a closed or failed connection, as IoException.
int status_of(const std::exception &e) {
    return std::strstr(e.what(), "Timed out") ? XMC_ERR_TIMEOUT : XMC_ERR_PEER_FAILED;
}

} // namespace

std::shared_ptr<gloo::transport::Device> gloo_device() {
    gloo::transport::tcp::attr attr;
    if (const char *iface = std::getenv("XMC_GLOO_IFACE"); iface && *iface) attr.iface = iface;
    else attr.hostname = "127.0.0.1";
    return gloo::transport::tcp::CreateDevice(attr);
}

GlooGroup::GlooGroup(const std::shared_ptr<gloo::transport::Device> &device, gloo::rendezvous::Store &store,
                     const std::string &prefix, int index, int size, uint32_t op_timeout_ms)
    : size_(size), op_timeout_ms_(op_timeout_ms) {
    transport_ = xmc_transport{this, send, recv, all_gather, "gloo"};
    if (size == 1) return;
    gloo::rendezvous::PrefixStore scoped(prefix, store);
    auto context = std::make_shared<gloo::rendezvous::Context>(index, size);
    // Joining may take long on a loaded machine; operations then get their own, shorter bound.
    context->setTimeout(std::chrono::seconds(60));
    auto dev = device;
    context->connectFullMesh(scoped, dev);
    context->setTimeout(std::chrono::milliseconds(op_timeout_ms));
    context_ = context;
}

GlooGroup::~GlooGroup() = default;

int GlooGroup::send(void *ctx, int32_t peer, const void *buf, size_t bytes, uint64_t tag) {
    auto &g = *static_cast<GlooGroup *>(ctx);
    if (!g.context_ || peer < 0 || peer >= g.size_ || peer == g.context_->rank) return XMC_ERR_INVALID_ARGUMENT;
    try {
        auto ub = g.context_->createUnboundBuffer(const_cast<void *>(buf), bytes);
        ub->send(peer, p2p_slot(tag));
        ub->waitSend(std::chrono::milliseconds(g.op_timeout_ms_));
        return 0;
    } catch (const std::exception &e) {
        return status_of(e);
    }
}

int GlooGroup::recv(void *ctx, int32_t peer, void *buf, size_t bytes, uint64_t tag) {
    auto &g = *static_cast<GlooGroup *>(ctx);
    if (!g.context_ || peer < 0 || peer >= g.size_ || peer == g.context_->rank) return XMC_ERR_INVALID_ARGUMENT;
    try {
        auto ub = g.context_->createUnboundBuffer(buf, bytes);
        ub->recv(peer, p2p_slot(tag));
        ub->waitRecv(std::chrono::milliseconds(g.op_timeout_ms_));
        return 0;
    } catch (const std::exception &e) {
        return status_of(e);
    }
}

int GlooGroup::all_gather(void *ctx, const void *in, void *out, size_t bytes, uint32_t timeout_ms) {
    auto &g = *static_cast<GlooGroup *>(ctx);
    if (!g.context_) {
        std::memcpy(out, in, bytes);
        return 0;
    }
    try {
        gloo::AllgatherOptions opts(g.context_);
        opts.setInput(static_cast<uint8_t *>(const_cast<void *>(in)), bytes);
        opts.setOutput(static_cast<uint8_t *>(out), bytes * size_t(g.size_));
        opts.setTag(g.gather_tag_++);
        opts.setTimeout(std::chrono::milliseconds(timeout_ms));
        gloo::allgather(opts);
        return 0;
    } catch (const std::exception &e) {
        return status_of(e);
    }
}

} // namespace xmc::conformance
