#include "transport_world.hpp"

#include "transport_threads.hpp"

#include <algorithm>
#include <utility>

namespace xmc::conformance {

namespace {
World *current = nullptr;
} // namespace

World &world() {
    static ThreadsWorld threads(4);  // four ranks: the size of the larger multirank run
    return current ? *current : threads;
}

void set_world(World *w) { current = w; }

GroupSpec whole_world(const World &w) {
    GroupSpec g;
    for (int r = 0; r < w.size(); ++r) {
        g.members.push_back(r);
        g.labels.push_back(r);
    }
    return g;
}

namespace {
std::mutex paths_mu;
std::map<std::string, uint64_t> paths_taken;  // guarded by paths_mu
} // namespace

void count_path_taken(int path) {
    const char *name = path == XMC_PATH_DIRECT ? "direct" : path == XMC_PATH_IPC ? "ipc" : path == XMC_PATH_NCCL ? "nccl"
                       : path == XMC_PATH_STAGED ? "staged" : nullptr;
    if (!name) return;  // not a path the backend reported (left as the harness filled it)
    std::lock_guard<std::mutex> lock(paths_mu);
    paths_taken[name] += 1;
}

std::map<std::string, uint64_t> take_paths_taken() {
    std::lock_guard<std::mutex> lock(paths_mu);
    return std::exchange(paths_taken, {});
}

RecordingTransport::RecordingTransport(const xmc_transport *inner, int group_size)
    : peers(size_t(group_size)), inner_(inner) {
    self_ = xmc_transport{this, send, recv, all_gather, inner->name};
}

bool RecordingTransport::should_fail() { return ops_++ == fail_op; }

int RecordingTransport::send(void *ctx, int32_t peer, const void *buf, size_t bytes, uint64_t tag) {
    auto *self = static_cast<RecordingTransport *>(ctx);
    {
        std::lock_guard<std::mutex> lock(self->mu_);
        if (self->should_fail()) return XMC_ERR_PEER_FAILED;
        if (peer >= 0 && size_t(peer) < self->peers.size()) {
            Peer &p = self->peers[size_t(peer)];
            p.sends += 1;
            p.bytes_sent += bytes;
            p.largest = std::max<uint64_t>(p.largest, bytes);
        }
        if (self->drop_sends) return 0;
    }
    return self->inner_->send(self->inner_->ctx, peer, buf, bytes, tag);
}

int RecordingTransport::recv(void *ctx, int32_t peer, void *buf, size_t bytes, uint64_t tag) {
    auto *self = static_cast<RecordingTransport *>(ctx);
    {
        std::lock_guard<std::mutex> lock(self->mu_);
        if (self->should_fail()) return XMC_ERR_PEER_FAILED;
        if (peer >= 0 && size_t(peer) < self->peers.size()) {
            Peer &p = self->peers[size_t(peer)];
            p.recvs += 1;
            p.bytes_received += bytes;
            p.largest = std::max<uint64_t>(p.largest, bytes);
        }
    }
    return self->inner_->recv(self->inner_->ctx, peer, buf, bytes, tag);
}

int RecordingTransport::all_gather(void *ctx, const void *in, void *out, size_t bytes, uint32_t timeout_ms) {
    auto *self = static_cast<RecordingTransport *>(ctx);
    {
        std::lock_guard<std::mutex> lock(self->mu_);
        self->all_gathers += 1;
    }
    return self->inner_->all_gather(self->inner_->ctx, in, out, bytes, timeout_ms);
}

} // namespace xmc::conformance
