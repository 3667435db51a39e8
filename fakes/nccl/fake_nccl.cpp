// The fake NCCL (fake_nccl_control.h): communicators over Unix domain sockets, point-to-point as a
// rendezvous, one worker thread per communicator, the fakes' fault scripts and a ledger. A group's
// work is ordered on its CUDA stream through the fake CUDA driver (xmc_fake_cuda_stream_enqueue):
// it starts only when the stream reaches it and the stream goes on only when it is done, so an
// executor that reuses staging without waiting on its stream is seen (AFF-STAGING-REUSE).
#include "fake_nccl_control.h"

#include <nccl.h>

#include <dlfcn.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fault_script.hpp"

#define XMC_FAKE_API extern "C" __attribute__((visibility("default")))

namespace {

// ---- results and the fault dialect ----

struct ResultName {
    ncclResult_t code;
    const char *name, *text;
};
constexpr ResultName kResults[] = {
    {ncclSuccess, "ncclSuccess", "no error"},
    {ncclUnhandledCudaError, "ncclUnhandledCudaError", "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"},
    {ncclSystemError, "ncclSystemError", "unhandled system error (run with NCCL_DEBUG=INFO for details)"},
    {ncclInternalError, "ncclInternalError", "internal error - please report this issue to the NCCL developers"},
    {ncclInvalidArgument, "ncclInvalidArgument", "invalid argument (run with NCCL_DEBUG=WARN for details)"},
    {ncclInvalidUsage, "ncclInvalidUsage", "invalid usage (run with NCCL_DEBUG=WARN for details)"},
    {ncclRemoteError, "ncclRemoteError", "remote process exited or there was a network error"},
    {ncclInProgress, "ncclInProgress", "NCCL operation in progress"},
};

const char *const kEntries[] = {"ncclGetVersion",  "ncclGetUniqueId", "ncclCommInitRank", "ncclCommInitRankConfig",
                                "ncclCommDestroy", "ncclCommAbort",   "ncclCommGetAsyncError", "ncclSend",
                                "ncclRecv",        "ncclGroupStart",  "ncclGroupEnd"};

struct Comm;
const xmc_faults::Dialect &dialect();

struct State {
    State();
    std::mutex mu;
    std::vector<xmc_faults::Rule> rules;
    std::string error;       // the last control error, or the malformed script's message
    bool bad_script = false;  // XMC_FAKE_NCCL_FAULTS was malformed: every entry fails
    bool trace = false;
    std::map<std::string, uint64_t> calls;
    std::set<Comm *> comms;  // the ledger
};
State &state() {
    static State s;
    return s;
}

uint64_t live_comms() { return state().comms.size(); }  // lock held

// The environment, read when the library loads.
State::State() {
    const char *t = std::getenv("XMC_FAKE_NCCL_TRACE");
    trace = t && *t && std::strcmp(t, "0") != 0;
    if (const char *f = std::getenv("XMC_FAKE_NCCL_FAULTS"); f && *f) {
        std::string err;
        if (!xmc_faults::parse(dialect(), f, rules, err)) {
            bad_script = true;
            error = "XMC_FAKE_NCCL_FAULTS: " + err;
            std::fprintf(stderr, "xmc_fake_nccl: %s\n", error.c_str());
        }
    }
}

const xmc_faults::Dialect &dialect() {
    static const xmc_faults::Dialect d = [] {
        xmc_faults::Dialect d;
        d.fake = "the fake NCCL";
        for (const char *e : kEntries) {
            xmc_faults::Entry f;
            f.name = e;
            f.takes_size = std::strcmp(e, "ncclSend") == 0 || std::strcmp(e, "ncclRecv") == 0;
            // exec_delay: the group's work waits that long once its stream reached it.
            f.enqueues = f.takes_size || std::strcmp(e, "ncclGroupEnd") == 0;
            if (std::strncmp(e, "ncclCommInitRank", 16) == 0) f.live = live_comms;
            d.entries.push_back(f);
        }
        d.code_by_name = [](std::string_view name, int64_t *value) {
            for (const ResultName &r : kResults)
                if (name == r.name) return *value = r.code, true;
            return false;
        };
        d.code_type = "ncclResult_t";
        d.max_code = ncclNumResults - 1;
        return d;
    }();
    return d;
}

// Every entry first: counts the call, applies the fault rules (a fail answers its code). An
// exec_delay adds to *exec_delay_us (entries that queue work).
ncclResult_t enter(const char *entry, const uint64_t *size = nullptr, uint64_t *exec_delay_us = nullptr) {
    State &s = state();
    xmc_faults::Decision d;
    {
        std::lock_guard<std::mutex> lock(s.mu);
        ++s.calls[entry];
        if (s.trace) std::fprintf(stderr, "xmc_fake_nccl: %s\n", entry);
        if (s.bad_script) return ncclInvalidUsage;
        d = xmc_faults::decide(s.rules, {entry, size != nullptr, size ? *size : 0});
    }
    if (d.delay_us) std::this_thread::sleep_for(std::chrono::microseconds(d.delay_us));
    if (exec_delay_us && !d.fail) *exec_delay_us += d.exec_delay_us;
    return d.fail ? ncclResult_t(d.code) : ncclSuccess;
}

// ---- communicators ----

constexpr char kIdMagic[8] = {'x', 'm', 'c', 'f', 'n', 'c', 'c', 'l'};
constexpr uint32_t kCts = 1, kData = 2;  // message types: ready to receive N bytes; N bytes follow

struct Op {
    bool send = false;
    int peer = 0;
    char *buf = nullptr;
    size_t bytes = 0;
    void *stream = nullptr;     // the cudaStream_t it was posted on
    uint64_t exec_delay_us = 0;  // its exec_delay faults
};

// One communicator's part of a group. Ordered (queued on its stream through the fake CUDA
// driver): the worker starts it only once the stream reached it, and the stream goes on only once
// it is done. Unordered (no fake CUDA driver in the process): it runs when the worker gets to it.
struct Group {
    std::vector<Op> ops;
    uint64_t delay_us = 0;  // exec_delay: held back this long before it moves anything
    bool ordered = false;
    std::mutex mu;
    std::condition_variable cv;
    bool reached = false;  // its stream reached it
    bool done = false;     // its work ended (moved, failed or dropped)
};

void mark_done(Group &g) {
    std::lock_guard<std::mutex> lock(g.mu);
    g.done = true;
    g.cv.notify_all();
}

struct Out {  // bytes queued to a peer: a header, then optionally data
    char hdr[16];
    const char *data = nullptr;
    size_t n = 0, off = 0;  // off counts the header's 16 bytes, then the data's
};

struct Peer {
    int fd = -1;
    std::deque<uint64_t> credits;  // the peer's posted receives (their sizes), not yet answered
    std::deque<Op> sends, recvs;   // this group's, in order
    std::deque<Out> out;
    char hdr[16];
    size_t hdr_got = 0;
    bool in_data = false;
    char *data_at = nullptr;
    uint64_t data_left = 0;
    bool closed = false;  // the peer closed its end
};

struct Comm {
    int nranks = 0, rank = 0;
    bool blocking = true;
    char id[16] = {};
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::shared_ptr<Group>> queue;
    bool busy = true;  // init, or an unordered group, not finished (an ordered one is the stream's)
    ncclResult_t result = ncclSuccess;  // sticky: the first error
    bool closing = false;
    std::atomic<bool> stop{false};
    std::vector<Peer> peers;
    std::thread worker;
};

sockaddr_un address(const Comm &c, int rank, socklen_t *len) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    char hex[33];
    for (int i = 0; i < 16; ++i) std::snprintf(hex + 2 * i, 3, "%02x", static_cast<unsigned char>(c.id[i]));
    // Abstract names (leading NUL): nothing to remove, gone with the last socket.
    const int n = std::snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "xmc-fake-nccl/%s/%d", hex, rank);
    *len = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + size_t(n));
    return a;
}

bool wait_fd(Comm &c, int fd, short events) {  // false when the communicator is being aborted
    while (!c.stop.load()) {
        pollfd p{fd, events, 0};
        if (::poll(&p, 1, 20) > 0) return true;
    }
    return false;
}

ncclResult_t connect_all(Comm &c) {
    c.peers.assign(size_t(c.nranks), Peer{});
    socklen_t len = 0;
    sockaddr_un me = address(c, c.rank, &len);
    const int lfd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) return ncclSystemError;
    if (::bind(lfd, reinterpret_cast<sockaddr *>(&me), len) != 0 || ::listen(lfd, c.nranks) != 0) {
        ::close(lfd);
        return errno == EADDRINUSE ? ncclInvalidUsage : ncclSystemError;  // two ranks with one number
    }
    ncclResult_t r = ncclSuccess;
    for (int q = 0; q < c.rank && r == ncclSuccess; ++q) {  // the lower ranks listen for the higher
        sockaddr_un to = address(c, q, &len);
        while (true) {
            const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd < 0) { r = ncclSystemError; break; }
            if (::connect(fd, reinterpret_cast<sockaddr *>(&to), len) == 0) {
                const int32_t hello = c.rank;
                if (::send(fd, &hello, sizeof hello, MSG_NOSIGNAL) != sizeof hello) r = ncclRemoteError;
                c.peers[size_t(q)].fd = fd;
                break;
            }
            ::close(fd);
            if (c.stop.load()) { r = ncclInternalError; break; }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));  // not listening yet
        }
    }
    for (int k = c.rank + 1; k < c.nranks && r == ncclSuccess; ++k) {
        if (!wait_fd(c, lfd, POLLIN)) { r = ncclInternalError; break; }
        const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
        int32_t hello = -1;
        if (fd < 0 || !wait_fd(c, fd, POLLIN) || ::recv(fd, &hello, sizeof hello, MSG_WAITALL) != sizeof hello ||
            hello <= c.rank || hello >= c.nranks || c.peers[size_t(hello)].fd >= 0) {
            if (fd >= 0) ::close(fd);
            r = ncclRemoteError;
            break;
        }
        c.peers[size_t(hello)].fd = fd;
    }
    ::close(lfd);
    return r;
}

void queue_msg(Peer &p, uint32_t type, uint64_t n, const char *data) {
    Out o;
    std::memset(o.hdr, 0, sizeof o.hdr);
    std::memcpy(o.hdr, &type, sizeof type);
    std::memcpy(o.hdr + 8, &n, sizeof n);
    o.data = data;
    o.n = data ? size_t(n) : 0;
    p.out.push_back(o);
}

// Reads what a peer sent: receive credits, and data for the receive at the head.
ncclResult_t read_peer(Peer &p) {
    while (true) {
        ssize_t k;
        if (!p.in_data) {
            k = ::recv(p.fd, p.hdr + p.hdr_got, sizeof p.hdr - p.hdr_got, MSG_DONTWAIT);
        } else {
            k = ::recv(p.fd, p.data_at, size_t(p.data_left), MSG_DONTWAIT);
        }
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return ncclSuccess;
        if (k <= 0) {
            // The peer closed (exited, aborted, destroyed its communicator): an error only while
            // this rank still waits for something from it.
            p.closed = true;
            return p.recvs.empty() && p.sends.empty() && !p.in_data && p.hdr_got == 0 ? ncclSuccess : ncclRemoteError;
        }
        if (p.in_data) {
            p.data_at += k;
            p.data_left -= uint64_t(k);
            if (p.data_left == 0) p.in_data = false, p.recvs.pop_front();
            continue;
        }
        p.hdr_got += size_t(k);
        if (p.hdr_got < sizeof p.hdr) continue;
        p.hdr_got = 0;
        uint32_t type = 0;
        uint64_t n = 0;
        std::memcpy(&type, p.hdr, sizeof type);
        std::memcpy(&n, p.hdr + 8, sizeof n);
        if (type == kCts) {
            p.credits.push_back(n);
        } else if (type == kData) {
            if (p.recvs.empty()) return ncclInternalError;  // data never asked for
            if (n != p.recvs.front().bytes) return ncclInvalidUsage;  // sizes of a pair differ
            if (n == 0) {
                p.recvs.pop_front();
            } else {
                p.in_data = true;
                p.data_at = p.recvs.front().buf;
                p.data_left = n;
            }
        } else {
            return ncclInternalError;
        }
    }
}

ncclResult_t write_peer(Peer &p) {
    while (!p.out.empty()) {
        Out &o = p.out.front();
        const bool hdr = o.off < sizeof o.hdr;
        const char *at = hdr ? o.hdr + o.off : o.data + (o.off - sizeof o.hdr);
        const size_t left = hdr ? sizeof o.hdr - o.off : o.n - (o.off - sizeof o.hdr);
        const ssize_t k = ::send(p.fd, at, left, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? ncclSuccess : ncclRemoteError;
        o.off += size_t(k);
        if (o.off == sizeof o.hdr + o.n) p.out.pop_front();
    }
    return ncclSuccess;
}

ncclResult_t run_group(Comm &c, std::vector<Op> &ops) {
    // To itself: each send matches the next receive from itself.
    std::deque<Op> self_sends, self_recvs;
    for (const Op &o : ops) {
        if (o.peer == c.rank) (o.send ? self_sends : self_recvs).push_back(o);
        else if (o.send) c.peers[size_t(o.peer)].sends.push_back(o);
        else {
            c.peers[size_t(o.peer)].recvs.push_back(o);
            queue_msg(c.peers[size_t(o.peer)], kCts, o.bytes, nullptr);
        }
    }
    if (self_sends.size() != self_recvs.size()) return ncclInvalidUsage;
    for (size_t i = 0; i < self_sends.size(); ++i) {
        if (self_sends[i].bytes != self_recvs[i].bytes) return ncclInvalidUsage;
        if (self_sends[i].bytes) std::memmove(self_recvs[i].buf, self_sends[i].buf, self_sends[i].bytes);
    }
    while (true) {
        bool left = false;
        std::vector<pollfd> fds;
        std::vector<Peer *> who;
        for (Peer &p : c.peers) {
            while (!p.sends.empty() && !p.credits.empty()) {
                // Rendezvous: the peer posted the matching receive; its size must be the send's.
                if (p.credits.front() != p.sends.front().bytes) return ncclInvalidUsage;
                queue_msg(p, kData, p.sends.front().bytes, p.sends.front().buf);
                p.credits.pop_front();
                p.sends.pop_front();
            }
            if (p.fd < 0) continue;
            const bool active = !p.sends.empty() || !p.recvs.empty() || !p.out.empty();
            if (!active) continue;
            if (p.closed) return ncclRemoteError;
            left = true;
            fds.push_back(pollfd{p.fd, short(POLLIN | (p.out.empty() ? 0 : POLLOUT)), 0});
            who.push_back(&p);
        }
        if (!left) return ncclSuccess;
        if (c.stop.load()) return ncclInternalError;
        if (::poll(fds.data(), fds.size(), 20) < 0 && errno != EINTR) return ncclSystemError;
        for (size_t i = 0; i < fds.size(); ++i) {
            if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
                if (ncclResult_t r = read_peer(*who[i]); r != ncclSuccess) return r;
            if (fds[i].revents & POLLOUT)
                if (ncclResult_t r = write_peer(*who[i]); r != ncclSuccess) return r;
        }
    }
}

bool unordered_queued(const Comm &c) {  // c.mu held
    return std::any_of(c.queue.begin(), c.queue.end(), [](const auto &g) { return !g->ordered; });
}

// Sleeps `us`, or less when the communicator is aborted; false then.
bool hold_back(Comm &c, uint64_t us) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    while (!c.stop.load()) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= end) return true;
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(end - now, std::chrono::milliseconds(5)));
    }
    return false;
}

void work(Comm *c) {
    ncclResult_t r = connect_all(*c);
    std::unique_lock<std::mutex> lock(c->mu);
    c->result = r;
    c->busy = false;
    c->cv.notify_all();
    while (true) {
        c->cv.wait(lock, [&] { return !c->queue.empty() || c->closing || c->stop.load(); });
        if (c->stop.load() || (c->queue.empty() && c->closing)) break;
        std::shared_ptr<Group> grp = c->queue.front();
        c->queue.pop_front();
        lock.unlock();
        // Stream order: nothing moves before the stream's earlier work is done (a copy that packs
        // this group's send buffer, say). Aborting the communicator drops a group still waiting.
        bool go = true;
        if (grp->ordered) {
            std::unique_lock<std::mutex> gl(grp->mu);
            while (!grp->reached && !c->stop.load()) grp->cv.wait_for(gl, std::chrono::milliseconds(20));
            go = grp->reached && !c->stop.load();
        }
        if (go && grp->delay_us) go = hold_back(*c, grp->delay_us);
        lock.lock();
        const bool failed = c->result != ncclSuccess;
        lock.unlock();
        const ncclResult_t g = !go ? ncclInternalError : failed ? ncclSuccess : run_group(*c, grp->ops);
        lock.lock();
        if (c->result == ncclSuccess) c->result = g;
        c->busy = unordered_queued(*c);
        c->cv.notify_all();
        mark_done(*grp);  // its stream goes on
    }
    // Groups never run (aborted, or the communicator closed): their streams go on.
    for (const auto &grp : c->queue) mark_done(*grp);
    c->queue.clear();
    c->busy = false;
    c->cv.notify_all();
}

bool live(Comm *c) {
    std::lock_guard<std::mutex> lock(state().mu);
    return state().comms.count(c) != 0;
}

ncclResult_t wait_idle(Comm *c) {
    std::unique_lock<std::mutex> lock(c->mu);
    c->cv.wait(lock, [&] { return !c->busy; });
    return c->result;
}

ncclResult_t init(ncclComm_t *out, int nranks, const ncclUniqueId &id, int rank, bool blocking, const char *entry) {
    if (ncclResult_t r = enter(entry); r != ncclSuccess) return r;
    if (!out || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
    if (std::memcmp(id.internal, kIdMagic, sizeof kIdMagic) != 0) return ncclInvalidArgument;
    auto *c = new Comm;
    c->nranks = nranks, c->rank = rank, c->blocking = blocking;
    std::memcpy(c->id, id.internal + sizeof kIdMagic, sizeof c->id);
    {
        std::lock_guard<std::mutex> lock(state().mu);
        state().comms.insert(c);
    }
    c->worker = std::thread(work, c);
    *out = reinterpret_cast<ncclComm_t>(c);
    if (!blocking) return ncclInProgress;
    return wait_idle(c);
}

void finish(Comm *c, bool abort) {
    {
        std::lock_guard<std::mutex> lock(c->mu);
        c->closing = true;
        if (abort) c->stop = true;
        c->cv.notify_all();
    }
    c->worker.join();
    for (Peer &p : c->peers)
        if (p.fd >= 0) ::close(p.fd);
    {
        std::lock_guard<std::mutex> lock(state().mu);
        state().comms.erase(c);
    }
    delete c;
}

// ---- groups (per calling thread) ----

thread_local int t_depth = 0;
thread_local std::map<Comm *, std::vector<Op>> t_ops;
thread_local ncclResult_t t_error = ncclSuccess;
thread_local uint64_t t_group_delay_us = 0;  // exec_delay of the ncclGroupEnd that submits

// The fake CUDA driver's stream enqueue (fake_cuda_control.h), found in the driver the process
// loaded (XMC_CUDA_DRIVER, as the backend and the tests load it); null while none is loaded.
using StreamEnqueue = int (*)(void *stream, void (*fn)(void *), void *user);
// Looked up at each group (a few microseconds), so that a test may load the driver or not.
StreamEnqueue stream_enqueue() {
    const char *path = std::getenv("XMC_CUDA_DRIVER");
    if (!path || !*path) return nullptr;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);  // only one already loaded
    if (!lib) return nullptr;
    auto e = reinterpret_cast<StreamEnqueue>(dlsym(lib, "xmc_fake_cuda_stream_enqueue"));
    dlclose(lib);  // drops our reference only: the program that loaded it keeps it loaded
    return e;
}

// Runs on the stream's worker when the stream reaches the group: lets the communicator's worker
// start it, and holds the stream until it is done (as NCCL's kernel occupies the stream).
void on_stream(void *user) {
    auto *held = static_cast<std::shared_ptr<Group> *>(user);
    Group &g = **held;
    {
        std::unique_lock<std::mutex> lock(g.mu);
        g.reached = true;
        g.cv.notify_all();
        g.cv.wait(lock, [&] { return g.done; });
    }
    delete held;
}

size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

ncclResult_t submit_all() {
    std::map<Comm *, std::vector<Op>> ops = std::move(t_ops);
    t_ops.clear();
    const ncclResult_t err = t_error;
    t_error = ncclSuccess;
    const uint64_t group_delay = t_group_delay_us;
    t_group_delay_us = 0;
    if (err != ncclSuccess) return err;  // a call of the group failed: the group does nothing
    const StreamEnqueue enqueue = stream_enqueue();
    // The fake takes one stream per communicator in a group (NCCL joins several; nothing here needs it).
    for (auto &[c, list] : ops)
        for (const Op &o : list)
            if (o.stream != list.front().stream) return ncclInvalidUsage;
    ncclResult_t r = ncclSuccess;
    bool in_progress = false;
    for (auto &[c, list] : ops) {
        auto grp = std::make_shared<Group>();
        grp->delay_us = group_delay;
        for (const Op &o : list) grp->delay_us += o.exec_delay_us;
        void *stream = list.front().stream;
        grp->ops = std::move(list);
        grp->ordered = enqueue != nullptr;
        std::lock_guard<std::mutex> lock(c->mu);
        if (grp->ordered) {
            // Queued on the communicator first, so that its groups keep their call order, then on
            // the stream; done when the stream is (cuStreamSynchronize, cuStreamQuery, an event).
            auto *held = new std::shared_ptr<Group>(grp);
            if (enqueue(stream, on_stream, held) != 0) {
                delete held;
                if (r == ncclSuccess) r = ncclUnhandledCudaError;
                continue;
            }
            c->queue.push_back(grp);
            c->cv.notify_all();
            continue;
        }
        c->queue.push_back(grp);
        c->busy = true;
        c->cv.notify_all();
    }
    if (r != ncclSuccess) return r;
    for (auto &[c, list] : ops) {
        if (!c->blocking) {
            in_progress = true;
        } else if (!enqueue) {  // ordered, the call returns once the work is on the stream
            if (ncclResult_t w = wait_idle(c); w != ncclSuccess && r == ncclSuccess) r = w;
        }
    }
    return r != ncclSuccess ? r : in_progress ? ncclInProgress : ncclSuccess;
}

ncclResult_t p2p(bool send, const char *entry, const void *buf, size_t count, ncclDataType_t type, int peer,
                 ncclComm_t comm, cudaStream_t stream) {
    const size_t ts = type_size(type);
    const uint64_t bytes = uint64_t(count) * ts;
    uint64_t exec_delay_us = 0;
    ncclResult_t r = enter(entry, &bytes, &exec_delay_us);
    auto *c = reinterpret_cast<Comm *>(comm);
    if (r == ncclSuccess && (!c || !live(c))) r = ncclInvalidArgument;
    if (r == ncclSuccess && (ts == 0 || peer < 0 || peer >= c->nranks || (count && !buf))) r = ncclInvalidArgument;
    if (r == ncclSuccess) {
        std::lock_guard<std::mutex> lock(c->mu);
        if (!c->busy && c->result != ncclSuccess) r = c->result;
    }
    if (r != ncclSuccess) {
        if (t_depth > 0 && t_error == ncclSuccess) t_error = r;
        return r;
    }
    t_ops[c].push_back(Op{send, peer, static_cast<char *>(const_cast<void *>(buf)), size_t(bytes),
                          static_cast<void *>(stream), exec_delay_us});
    return t_depth > 0 ? ncclSuccess : submit_all();
}

}  // namespace

// ---- the NCCL entries ----

XMC_FAKE_API ncclResult_t ncclGetVersion(int *version) {
    if (ncclResult_t r = enter("ncclGetVersion"); r != ncclSuccess) return r;
    if (!version) return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

XMC_FAKE_API const char *ncclGetErrorString(ncclResult_t result) {
    for (const ResultName &r : kResults)
        if (r.code == result) return r.text;
    return "unknown result code";
}

XMC_FAKE_API ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    if (ncclResult_t r = enter("ncclGetUniqueId"); r != ncclSuccess) return r;
    if (!id) return ncclInvalidArgument;
    std::memset(id->internal, 0, sizeof id->internal);
    std::memcpy(id->internal, kIdMagic, sizeof kIdMagic);
    std::random_device rd;
    for (size_t i = 0; i < 16; i += 4) {
        const uint32_t x = rd();
        std::memcpy(id->internal + sizeof kIdMagic + i, &x, 4);
    }
    return ncclSuccess;
}

XMC_FAKE_API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    return init(comm, nranks, id, rank, true, "ncclCommInitRank");
}

XMC_FAKE_API ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                                 ncclConfig_t *config) {
    return init(comm, nranks, id, rank, !(config && config->blocking == 0), "ncclCommInitRankConfig");
}

XMC_FAKE_API ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (ncclResult_t r = enter("ncclCommDestroy"); r != ncclSuccess) return r;
    auto *c = reinterpret_cast<Comm *>(comm);
    if (!c || !live(c)) return ncclInvalidArgument;
    finish(c, false);
    return ncclSuccess;
}

XMC_FAKE_API ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (ncclResult_t r = enter("ncclCommAbort"); r != ncclSuccess) return r;
    auto *c = reinterpret_cast<Comm *>(comm);
    if (!c || !live(c)) return ncclInvalidArgument;
    finish(c, true);
    return ncclSuccess;
}

XMC_FAKE_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async) {
    if (ncclResult_t r = enter("ncclCommGetAsyncError"); r != ncclSuccess) return r;
    auto *c = reinterpret_cast<Comm *>(comm);
    if (!c || !async || !live(c)) return ncclInvalidArgument;
    std::lock_guard<std::mutex> lock(c->mu);
    *async = c->busy ? ncclInProgress : c->result;
    return ncclSuccess;
}

XMC_FAKE_API ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                                   cudaStream_t stream) {
    return p2p(true, "ncclSend", buf, count, type, peer, comm, stream);
}

XMC_FAKE_API ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                                   cudaStream_t stream) {
    return p2p(false, "ncclRecv", buf, count, type, peer, comm, stream);
}

XMC_FAKE_API ncclResult_t ncclGroupStart() {
    if (ncclResult_t r = enter("ncclGroupStart"); r != ncclSuccess) return r;
    ++t_depth;
    return ncclSuccess;
}

XMC_FAKE_API ncclResult_t ncclGroupEnd() {
    if (ncclResult_t r = enter("ncclGroupEnd", nullptr, &t_group_delay_us); r != ncclSuccess) {
        if (t_depth > 0 && --t_depth == 0) t_ops.clear(), t_error = ncclSuccess, t_group_delay_us = 0;  // dropped
        return r;
    }
    if (t_depth == 0) return t_group_delay_us = 0, ncclInvalidUsage;
    if (--t_depth > 0) return ncclSuccess;
    return submit_all();
}

// ---- control ----

XMC_FAKE_API int xmc_fake_nccl_set_faults(const char *script) {
    State &s = state();
    std::vector<xmc_faults::Rule> rules;
    std::string err;
    if (script && *script && !xmc_faults::parse(dialect(), script, rules, err)) {
        std::lock_guard<std::mutex> lock(s.mu);
        s.error = err;
        return -1;
    }
    std::lock_guard<std::mutex> lock(s.mu);
    s.rules = std::move(rules);
    s.bad_script = false;
    return 0;
}

XMC_FAKE_API const char *xmc_fake_nccl_last_error(void) {
    static thread_local std::string copy;
    std::lock_guard<std::mutex> lock(state().mu);
    copy = state().error;
    return copy.c_str();
}

XMC_FAKE_API uint64_t xmc_fake_nccl_live_comms(void) {
    std::lock_guard<std::mutex> lock(state().mu);
    return live_comms();
}

XMC_FAKE_API uint64_t xmc_fake_nccl_calls(const char *entry) {
    std::lock_guard<std::mutex> lock(state().mu);
    auto it = state().calls.find(entry ? entry : "");
    return it == state().calls.end() ? 0 : it->second;
}
