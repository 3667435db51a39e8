#include "transport_delay.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace xmc::conformance {

using Clock = std::chrono::steady_clock;

DelayingTransport::DelayingTransport(const xmc_transport *inner, uint32_t read_delay_ms, uint32_t hold_ms)
    : inner_(inner), read_delay_ms_(read_delay_ms), hold_ms_(hold_ms) {
    self_ = xmc_transport{this, send, recv, all_gather, inner->name};
    forwarder_ = std::thread([this] { forward(); });
}

DelayingTransport::~DelayingTransport() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
        cv_.notify_all();
    }
    forwarder_.join();
    for (std::thread &t : senders_) t.join();
}

uint64_t DelayingTransport::overtaken() const {
    std::lock_guard<std::mutex> lock(mu_);
    return overtaken_;
}

int DelayingTransport::failed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
}

int DelayingTransport::send(void *ctx, int32_t peer, const void *buf, size_t bytes, uint64_t tag) {
    auto &t = *static_cast<DelayingTransport *>(ctx);
    if (int e = t.failed()) return e;
    // The send reads its buffer late, then returns: writing the buffer before that changes what is sent.
    std::this_thread::sleep_for(std::chrono::milliseconds(t.read_delay_ms_));
    const char *p = static_cast<const char *>(buf);
    std::lock_guard<std::mutex> lock(t.mu_);
    if (peer < 0) return XMC_ERR_INVALID_ARGUMENT;
    if (size_t(peer) >= t.sent_.size()) t.sent_.resize(size_t(peer) + 1, 0);
    const uint32_t extra = t.sent_[size_t(peer)]++ % 2 == 0 ? t.hold_ms_ : 0;
    t.held_.push_back(Held{peer, tag, t.seq_++, std::vector<char>(p, p + bytes),
                           Clock::now() + std::chrono::milliseconds(extra)});
    t.cv_.notify_all();
    return 0;
}

int DelayingTransport::recv(void *ctx, int32_t peer, void *buf, size_t bytes, uint64_t tag) {
    auto &t = *static_cast<DelayingTransport *>(ctx);
    if (int e = t.failed()) return e;
    return t.inner_->recv(t.inner_->ctx, peer, buf, bytes, tag);
}

int DelayingTransport::all_gather(void *ctx, const void *in, void *out, size_t bytes, uint32_t timeout_ms) {
    auto &t = *static_cast<DelayingTransport *>(ctx);
    return t.inner_->all_gather(t.inner_->ctx, in, out, bytes, timeout_ms);
}

// Hands each held message to the inner transport once it is due, earliest due first: messages
// with a shorter extra delay overtake those sent before them.
void DelayingTransport::forward() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
        if (held_.empty()) {
            if (stop_) return;
            cv_.wait(lock);
            continue;
        }
        auto next = std::min_element(held_.begin(), held_.end(), [](const Held &a, const Held &b) { return a.due < b.due; });
        if (!stop_ && next->due > Clock::now()) {
            cv_.wait_until(lock, next->due);
            continue;
        }
        Held h = std::move(*next);
        held_.erase(next);
        if (size_t(h.peer) >= last_delivered_.size()) last_delivered_.resize(size_t(h.peer) + 1, 0);
        if (h.seq + 1 < last_delivered_[size_t(h.peer)]) ++overtaken_;
        last_delivered_[size_t(h.peer)] = std::max(last_delivered_[size_t(h.peer)], h.seq + 1);
        // Each message on a thread of its own: an inner send that waits for its receive (gloo)
        // must not hold back the message the receiver waits for first.
        senders_.emplace_back([this, h = std::move(h)] {
            const int rc = inner_->send(inner_->ctx, h.peer, h.data.data(), h.data.size(), h.tag);
            std::lock_guard<std::mutex> l(mu_);
            if (rc != 0 && error_ == 0) error_ = rc;
        });
    }
}

} // namespace xmc::conformance
