#include "transport_threads.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

namespace xmc::conformance {

using Clock = std::chrono::steady_clock;

ThreadsMailbox::ThreadsMailbox(int size, uint32_t op_timeout_ms)
    : size_(size), op_timeout_ms_(op_timeout_ms), inbox_(size_t(size)), rounds_started_(size_t(size), 0) {
    for (int i = 0; i < size; ++i) {
        ends_.push_back(std::make_unique<End>(End{this, i, {}}));
        ends_.back()->transport = xmc_transport{ends_.back().get(), send, recv, all_gather, "threads"};
    }
}

void ThreadsMailbox::abort() {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    cv_.notify_all();
}

int ThreadsMailbox::send(void *ctx, int32_t peer, const void *buf, size_t bytes, uint64_t tag) {
    End &e = *static_cast<End *>(ctx);
    ThreadsMailbox &box = *e.box;
    if (peer < 0 || peer >= box.size_ || peer == e.index) return XMC_ERR_INVALID_ARGUMENT;
    std::lock_guard<std::mutex> lock(box.mu_);
    if (box.aborted_) return XMC_ERR_PEER_FAILED;
    const char *p = static_cast<const char *>(buf);
    box.inbox_[size_t(peer)].push_back(Message{e.index, tag, std::vector<char>(p, p + bytes)});
    box.cv_.notify_all();
    return 0;
}

int ThreadsMailbox::recv(void *ctx, int32_t peer, void *buf, size_t bytes, uint64_t tag) {
    End &e = *static_cast<End *>(ctx);
    ThreadsMailbox &box = *e.box;
    if (peer < 0 || peer >= box.size_ || peer == e.index) return XMC_ERR_INVALID_ARGUMENT;
    std::unique_lock<std::mutex> lock(box.mu_);
    std::deque<Message> &q = box.inbox_[size_t(e.index)];
    auto match = q.end();
    auto found = [&] {
        for (match = q.begin(); match != q.end(); ++match)
            if (match->from == peer && match->tag == tag) return true;
        return false;
    };
    const auto deadline = Clock::now() + std::chrono::milliseconds(box.op_timeout_ms_);
    if (!box.cv_.wait_until(lock, deadline, [&] { return box.aborted_ || found(); })) return XMC_ERR_TIMEOUT;
    if (box.aborted_) return XMC_ERR_PEER_FAILED;
    const bool same_size = match->data.size() == bytes;
    if (same_size) std::memcpy(buf, match->data.data(), bytes);
    q.erase(match);
    return same_size ? 0 : XMC_ERR_PEER_FAILED;
}

int ThreadsMailbox::all_gather(void *ctx, const void *in, void *out, size_t bytes, uint32_t timeout_ms) {
    End &e = *static_cast<End *>(ctx);
    ThreadsMailbox &box = *e.box;
    std::unique_lock<std::mutex> lock(box.mu_);
    if (box.aborted_) return XMC_ERR_PEER_FAILED;
    Round &r = box.rounds_[box.rounds_started_[size_t(e.index)]++];
    if (r.arrived == 0) {
        r.bytes = bytes;
        r.data.assign(bytes * size_t(box.size_), 0);
    }
    if (r.bytes != bytes) r.mismatch = true;
    else std::memcpy(r.data.data() + bytes * size_t(e.index), in, bytes);
    r.arrived += 1;
    box.cv_.notify_all();
    // Yield for up to 100 us before sleeping: a sleeping thread's wake-up
    // costs tens of microseconds on a virtual machine, several times per
    // transfer (seen in the H200 transfer benchmark).
    const auto spin_end = Clock::now() + std::chrono::microseconds(100);
    while (!box.aborted_ && r.arrived != box.size_ && Clock::now() < spin_end) {
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
    }
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    if (!box.cv_.wait_until(lock, deadline, [&] { return box.aborted_ || r.arrived == box.size_; }))
        return XMC_ERR_TIMEOUT;
    if (box.aborted_ || r.mismatch) return XMC_ERR_PEER_FAILED;
    std::memcpy(out, r.data.data(), r.data.size());
    return 0;
}

std::vector<std::string> ThreadsWorld::run(const std::vector<GroupSpec> &groups, uint32_t op_timeout_ms,
                                           uint32_t deadline_ms, const RankBody &body) {
    struct Slot {
        RankEnv env;
        std::vector<std::string> failures;
        bool done = false;
        bool late = false;
    };
    std::vector<std::unique_ptr<ThreadsMailbox>> boxes;
    std::vector<Slot> slots;
    std::vector<bool> used(size_t(size_), false);
    for (size_t g = 0; g < groups.size(); ++g) {
        const GroupSpec &spec = groups[g];
        if (spec.members.empty() || spec.members.size() != spec.labels.size())
            return {"harness: group " + std::to_string(g) + " has no members or a label count that differs"};
        boxes.push_back(std::make_unique<ThreadsMailbox>(int(spec.members.size()), op_timeout_ms));
        for (size_t i = 0; i < spec.members.size(); ++i) {
            const int r = spec.members[i];
            if (r < 0 || r >= size_ || used[size_t(r)])
                return {"harness: world rank " + std::to_string(r) + " is outside the world or in two groups"};
            used[size_t(r)] = true;
            Slot s;
            s.env = RankEnv{r, int(g), int32_t(i), spec.labels, boxes.back()->endpoint(int(i)), op_timeout_ms};
            slots.push_back(std::move(s));
        }
    }

    std::mutex mu;
    std::condition_variable cv;
    size_t finished = 0;
    std::vector<std::thread> threads;
    for (Slot &s : slots) {
        threads.emplace_back([&, &s = s] {
            std::vector<std::string> f;
            try {
                f = body(s.env);
            } catch (const std::exception &e) {
                f.push_back(std::string("exception: ") + e.what());
            } catch (...) {
                f.push_back("unknown exception");
            }
            std::lock_guard<std::mutex> lock(mu);
            s.failures = std::move(f);
            s.done = true;
            ++finished;
            cv.notify_all();
        });
    }
    {
        std::unique_lock<std::mutex> lock(mu);
        const auto all_done = [&] { return finished == slots.size(); };
        if (!cv.wait_for(lock, std::chrono::milliseconds(deadline_ms), all_done)) {
            for (Slot &s : slots) s.late = !s.done;
            // Make the late ranks' transports fail, so that a backend that ignores timeouts returns.
            for (auto &b : boxes) b->abort();
            if (!cv.wait_for(lock, std::chrono::seconds(10), all_done)) {
                std::fprintf(stderr, "xmc: a rank ignored its aborted transport for 10 s after a %u ms deadline; "
                                     "cannot continue this process\n", deadline_ms);
                std::fflush(stderr);
                std::_Exit(3);
            }
        }
    }
    for (auto &t : threads) t.join();

    std::vector<std::string> out;
    for (const Slot &s : slots) {
        const std::string who = "rank " + std::to_string(s.env.label()) + " (thread " + std::to_string(s.env.world_rank) + "): ";
        if (s.late)
            out.push_back(who + "did not return within " + std::to_string(deadline_ms) +
                          " ms (the harness then aborted its transport)");
        for (const auto &f : s.failures) out.push_back(who + f);
    }
    return out;
}

} // namespace xmc::conformance
