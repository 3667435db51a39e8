// A delaying, reordering transport for the executor tests of AFF-STAGING-REUSE: it wraps one
// rank's end of a group's transport and
//  - makes every send slow: the send holds its buffer for `read_delay_ms` before it reads it (as a
//    network card reads a buffer by DMA while the send is in flight), and only then returns, so an
//    executor that writes a buffer again before the send that reads it returned sends the wrong
//    bytes;
//  - delivers late and out of order: each message, once read, is handed to the inner transport by
//    a forwarding thread, every other message to a peer (the first, third, ...) after a further
//    `hold_ms`: with hold_ms above read_delay_ms, the message sent after it arrives first
//    (receives match by tag, so a correct executor does not care). Each forwarded send runs on a
//    thread of its own, so an inner send that waits for its receive blocks no other message.
// all_gather passes straight through. Every operation is still bounded: a forwarded send that the
// inner transport refuses makes the next operation on this end fail. Thread-safe.
#pragma once
#include <xmc/backend.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace xmc::conformance {

class DelayingTransport {
public:
    DelayingTransport(const xmc_transport *inner, uint32_t read_delay_ms, uint32_t hold_ms);
    ~DelayingTransport();  // forwards what is still held, then stops the forwarding thread
    DelayingTransport(const DelayingTransport &) = delete;
    DelayingTransport &operator=(const DelayingTransport &) = delete;

    const xmc_transport *transport() const { return &self_; }
    // Messages delivered after a message to the same peer that was sent later (seen reordering).
    uint64_t overtaken() const;

private:
    struct Held {
        int32_t peer;
        uint64_t tag;
        uint64_t seq;  // order of the sends
        std::vector<char> data;
        std::chrono::steady_clock::time_point due;
    };
    static int send(void *ctx, int32_t peer, const void *buf, size_t bytes, uint64_t tag);
    static int recv(void *ctx, int32_t peer, void *buf, size_t bytes, uint64_t tag);
    static int all_gather(void *ctx, const void *in, void *out, size_t bytes, uint32_t timeout_ms);
    void forward();
    int failed() const;

    const xmc_transport *inner_;
    const uint32_t read_delay_ms_, hold_ms_;
    std::vector<uint64_t> sent_;            // per peer: messages sent
    xmc_transport self_{};
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Held> held_;
    std::vector<uint64_t> last_delivered_;  // per peer: the highest seq delivered
    uint64_t seq_ = 0, overtaken_ = 0;
    int error_ = 0;  // the first failure of a forwarded send
    bool stop_ = false;
    std::thread forwarder_;
    std::vector<std::thread> senders_;  // one per forwarded message; joined by the destructor
};

} // namespace xmc::conformance
