// xmc-selftest: fails AFF-STAGING-REUSE
// xmc-selftest: filter AFF-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 300
// Bug (a staging buffer reused too early): sends are made asynchronous to overlap
// them with packing, and a send is waited for only up to a short bound before its staging is
// handed back, on the belief that any transport has taken the bytes by then. When a send reads its
// buffer later than that (a slow network, a late DMA), the executor packs the next chunk into the
// staging the send is still reading, and the peer gets the wrong bytes. Here each send goes to a
// helper thread, and the executor waits 200 ms at most for it.
#include "broken.hpp"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace xmc::broken {
namespace {

constexpr auto kBound = std::chrono::milliseconds(200);

struct Async {
    const xmc_transport *inner;
    std::mutex mu;
    std::condition_variable cv;
    struct Job {
        int32_t peer;
        const void *buf;
        size_t bytes;
        uint64_t tag;
        uint64_t id;
    };
    std::deque<Job> jobs;
    uint64_t next_id = 0, done_id = 0;  // sends issued, sends finished (in order)
    int error = 0;
    bool stop = false;
    std::thread helper;

    explicit Async(const xmc_transport *t) : inner(t) {
        helper = std::thread([this] {
            std::unique_lock<std::mutex> lock(mu);
            while (true) {
                cv.wait(lock, [&] { return stop || !jobs.empty(); });
                if (jobs.empty()) return;
                Job j = jobs.front();
                jobs.pop_front();
                lock.unlock();
                const int rc = inner->send(inner->ctx, j.peer, j.buf, j.bytes, j.tag);
                lock.lock();
                if (rc && !error) error = rc;
                done_id = j.id + 1;
                cv.notify_all();
            }
        });
    }
    ~Async() {  // every send has finished when the call returns
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return done_id == next_id; });
        stop = true;
        cv.notify_all();
        lock.unlock();
        helper.join();
    }
};

int send(void *c, int32_t peer, const void *buf, size_t bytes, uint64_t tag) {
    auto &x = *static_cast<Async *>(c);
    std::unique_lock<std::mutex> lock(x.mu);
    if (x.error) return x.error;
    const uint64_t id = x.next_id++;
    x.jobs.push_back({peer, buf, bytes, tag, id});
    x.cv.notify_all();
    // The bug: after the bound the buffer is taken back, whether the send has read it or not.
    x.cv.wait_for(lock, kBound, [&] { return x.done_id > id; });
    return x.error;
}
int recv(void *c, int32_t peer, void *buf, size_t bytes, uint64_t tag) {
    auto &x = *static_cast<Async *>(c);
    return x.inner->recv(x.inner->ctx, peer, buf, bytes, tag);
}
int all_gather(void *c, const void *in, void *out, size_t bytes, uint32_t timeout_ms) {
    auto &x = *static_cast<Async *>(c);
    return x.inner->all_gather(x.inner->ctx, in, out, bytes, timeout_ms);
}

} // namespace

static xmc_status transfer_execute(xmc_instance *inst, const xmc_transfer_args *a, xmc_transfer_stats *st) {
    if (!a || !a->group || !a->group->transport || !whole_transport(*a->group->transport))
        return host()->transfer_execute(inst, a, st);
    Async x(a->group->transport);
    const xmc_transport tp{&x, send, recv, all_gather, x.inner->name};
    xmc_group g = *a->group;
    g.transport = &tp;
    xmc_transfer_args args = *a;
    args.group = &g;
    return host()->transfer_execute(inst, &args, st);
}
void plant(xmc_backend &t) { t.transfer_execute = transfer_execute; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_staging_reused_early")
