// The threads transport: the ranks of a group are threads of one process that exchange messages
// through a shared mailbox. This makes multi-rank properties fast enough for every PR.
#pragma once
#include "transport_world.hpp"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace xmc::conformance {

// One group's mailbox, with one transport end per member. A send copies the message into the
// receiver's queue and never blocks. A recv waits, up to the timeout, for the message from that
// peer with that tag; a message of another size is an error. An all_gather waits, up to its
// timeout, until every member has contributed to the same round (a member's k-th call is round k).
// Transport calls return 0 or an xmc_status.
class ThreadsMailbox {
public:
    ThreadsMailbox(int size, uint32_t op_timeout_ms);
    ThreadsMailbox(const ThreadsMailbox &) = delete;
    ThreadsMailbox &operator=(const ThreadsMailbox &) = delete;

    const xmc_transport *endpoint(int index) const { return &ends_[size_t(index)]->transport; }
    // Every waiting and later operation fails with XMC_ERR_PEER_FAILED.
    void abort();

private:
    struct End {
        ThreadsMailbox *box;
        int index;
        xmc_transport transport;
    };
    struct Message {
        int from;
        uint64_t tag;
        std::vector<char> data;
    };
    struct Round {
        size_t bytes = 0;
        int arrived = 0;
        bool mismatch = false;  // members contributed different sizes
        std::vector<char> data;
    };
    static int send(void *ctx, int32_t peer, const void *buf, size_t bytes, uint64_t tag);
    static int recv(void *ctx, int32_t peer, void *buf, size_t bytes, uint64_t tag);
    static int all_gather(void *ctx, const void *in, void *out, size_t bytes, uint32_t timeout_ms);

    const int size_;
    const uint32_t op_timeout_ms_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool aborted_ = false;
    std::vector<std::deque<Message>> inbox_;  // per receiver
    std::vector<uint64_t> rounds_started_;    // per member
    std::map<uint64_t, Round> rounds_;
    std::vector<std::unique_ptr<End>> ends_;
};

// A world of `size` ranks, each a thread of this process; every run gets fresh mailboxes.
class ThreadsWorld : public World {
public:
    explicit ThreadsWorld(int size) : size_(size) {}
    const char *name() const override { return "threads"; }
    int size() const override { return size_; }
    std::vector<std::string> run(const std::vector<GroupSpec> &groups, uint32_t op_timeout_ms, uint32_t deadline_ms,
                                 const RankBody &body) override;

private:
    int size_;
};

} // namespace xmc::conformance
