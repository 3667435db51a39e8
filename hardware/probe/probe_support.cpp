// The probe's shared helpers that are more than a line or two; see probe_support.h.
#include "probe_support.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cerrno>
#include <thread>

namespace xmc::probe {

void CUDA_CB gate_fn(void* u) {
    auto* g = static_cast<Gate*>(u);
    g->entered.store(true);
    g->runs.fetch_add(1);
    auto t0 = std::chrono::steady_clock::now();
    while (!g->open.load() && ms_since(t0) < g->limit_ms)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    g->done.fetch_add(1);
}

void open_and_drain(Gate* g, int runs, int limit_ms) {
    g->open.store(true);
    auto t0 = std::chrono::steady_clock::now();
    while (g->done.load() < runs && ms_since(t0) < limit_ms)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

CUresult on_other_thread(P& p, CUcontext ctx, const std::function<CUresult()>& fn) {
    CUresult r = CUDA_ERROR_UNKNOWN;
    std::thread t([&] {
        CUresult c = p.d.cuCtxSetCurrent(ctx);
        r = c == CUDA_SUCCESS ? fn() : c;
        p.d.cuCtxSetCurrent(nullptr);
    });
    t.join();
    return r;
}

void own_context(P& p, Cleanup& cl) {
    TRY(p.d.cuInit(0));
    TRY(p.d.cuDeviceGetCount(&p.device_count));
    TRY(p.d.cuDeviceGet(&p.dev[0], 0));
    TRY(p.d.cuDevicePrimaryCtxRetain(&p.ctx[0], p.dev[0]));
    Driver* d = &p.d;
    CUdevice dev = p.dev[0];
    cl.add([d, dev] {
        d->cuCtxSetCurrent(nullptr);
        d->cuDevicePrimaryCtxRelease(dev);
    });
    TRY(p.d.cuCtxSetCurrent(p.ctx[0]));
}

// ---- Peer ------------------------------------------------------------------------------

bool Peer::Link::send(const void* data, size_t n, int fd) const {
    msghdr m{};
    iovec io{const_cast<void*>(data), n};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
    if (fd >= 0) {
        std::memset(ctl, 0, sizeof ctl);
        m.msg_control = ctl;
        m.msg_controllen = sizeof ctl;
        cmsghdr* c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    ssize_t w;
    do {
        w = sendmsg(sock, &m, MSG_NOSIGNAL);
    } while (w < 0 && errno == EINTR);
    return w == static_cast<ssize_t>(n);
}

bool Peer::Link::recv(void* data, size_t n, int* fd, int limit_ms) const {
    pollfd pf{sock, POLLIN, 0};
    int pr;
    do {
        pr = poll(&pf, 1, limit_ms);
    } while (pr < 0 && errno == EINTR);
    if (pr <= 0) return false;
    msghdr m{};
    iovec io{data, n};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    ssize_t r;
    do {
        r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    } while (r < 0 && errno == EINTR);
    if (fd != nullptr) {
        *fd = -1;
        for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(fd, CMSG_DATA(c), sizeof(int));
    }
    return r == static_cast<ssize_t>(n);
}

Peer::Peer(P& p, std::function<void(P&, const Link&)> body, int limit_ms) : limit_ms_(limit_ms) {
    // SOCK_SEQPACKET keeps each message whole, so a reply is one recv.
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        throw SetupFailed{CUDA_ERROR_OPERATING_SYSTEM, "socketpair"};
    std::fflush(stdout);
    std::fflush(stderr);
    pid_ = fork();
    if (pid_ < 0) {
        close(sv[0]);
        close(sv[1]);
        throw SetupFailed{CUDA_ERROR_OPERATING_SYSTEM, "fork"};
    }
    if (pid_ == 0) {
        close(sv[0]);
        Link child{sv[1]};
        try {
            body(p, child);
        } catch (...) {
            // the parent sees the socket close without a reply
        }
        _exit(0);  // not the parent's exit handlers, nor the driver's
    }
    close(sv[1]);
    link_.sock = sv[0];
}

Peer::~Peer() {
    if (link_.sock >= 0) close(link_.sock);
    if (pid_ <= 0) return;
    auto t0 = std::chrono::steady_clock::now();
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid_, &status, WNOHANG);
        if (w == pid_ || (w < 0 && errno != EINTR)) return;
        if (ms_since(t0) > limit_ms_) {
            kill(pid_, SIGKILL);
            waitpid(pid_, &status, 0);
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

}  // namespace xmc::probe
