// The group's board (board.hpp): a transport in POSIX shared memory, and which board each group has.
#include "board.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include <cerrno>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

namespace xmc::transfer {

struct Board::Slot {
    std::atomic<uint64_t> seq;  // the round whose payload this slot holds (0: none yet; kPoisoned: broken)
    char pad[56];
    char payload[kPayload];
};
struct Board::Ring {
    std::atomic<uint64_t> sent;   // pieces the sender published
    char pad0[56];
    std::atomic<uint64_t> taken;  // pieces the receiver copied out
    char pad1[56];
    struct Piece {
        uint64_t tag, message, offset, len;  // the message's tag and size, this piece's place in it
        char pad[32];
        char data[kPiece];
    } pieces[kPieces];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "a board's flags are shared between processes");

namespace {

std::string shm_name(uint64_t name) {
    char s[40];
    std::snprintf(s, sizeof s, "/xmc-board-%016llx", static_cast<unsigned long long>(name));
    return s;
}

}  // namespace

std::shared_ptr<Board> Board::open(uint64_t name, int size, int me, std::string *why) {
    const std::string path = shm_name(name);
    const size_t bytes = sizeof(Slot) * 2 * size_t(size) + sizeof(Ring) * size_t(size) * size_t(size);
    const int fd = ::shm_open(path.c_str(), O_CREAT | O_RDWR, 0600);
    if (fd < 0) {
        *why = "shm_open(" + path + ") failed: " + std::strerror(errno);
        return nullptr;
    }
    // Every rank sizes it; a new object reads as zeros (no round yet), a resize to the same size
    // changes nothing. Its pages are reserved now: a page of a sparse file that a full /dev/shm
    // (64 MiB in a default container) cannot back is SIGBUS when first written, not an error.
    int err = ::ftruncate(fd, off_t(bytes)) == 0 ? ::posix_fallocate(fd, 0, off_t(bytes)) : errno;
    void *m = err == 0 ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (err == 0 && m == MAP_FAILED) err = errno;
    ::close(fd);
    if (m == MAP_FAILED) {
        *why = "sizing, reserving or mapping " + std::to_string(bytes) + " bytes of " + path + " failed: " + std::strerror(err);
        ::shm_unlink(path.c_str());
        return nullptr;
    }
    return std::shared_ptr<Board>(new Board(name, size, me, static_cast<char *>(m), bytes));
}

Board::Board(uint64_t name, int size, int me, char *base, size_t bytes)
    : name_(name), size_(size), me_(me), base_(base), bytes_(bytes) {
    tp_.ctx = this;
    tp_.name = "shared memory";
    tp_.send = [](void *c, int32_t p, const void *b, size_t n, uint64_t tag) {
        return int(static_cast<Board *>(c)->send(p, b, n, tag));
    };
    tp_.recv = [](void *c, int32_t p, void *b, size_t n, uint64_t tag) {
        return int(static_cast<Board *>(c)->recv(p, b, n, tag));
    };
    tp_.all_gather = [](void *c, const void *in, void *out, size_t n, uint32_t) {
        return int(static_cast<Board *>(c)->gather(in, out, n));
    };
}

Board::~Board() {
    unlink();
    ::munmap(base_, bytes_);
}

const xmc_transport *Board::transport(uint32_t timeout_ms) {
    timeout_ms_ = timeout_ms;
    return &tp_;
}

void Board::unlink() {
    if (unlinked_) return;
    unlinked_ = true;
    ::shm_unlink(shm_name(name_).c_str());  // ENOENT: a peer did it first
}

Board::Slot &Board::slot(int rank, int parity) {
    return reinterpret_cast<Slot *>(base_)[2 * rank + parity];
}

Board::Ring &Board::ring(int from, int to) {
    return reinterpret_cast<Ring *>(base_ + sizeof(Slot) * 2 * size_t(size_))[from * size_ + to];
}

xmc_status Board::poison(xmc_status why) {
    broken_ = true;
    // A peer that waits for this rank, or comes late to a round this rank gave up on, then fails
    // at once instead of reading a vote this rank no longer stands by.
    for (int parity = 0; parity < 2; ++parity) slot(me_, parity).seq.store(kPoisoned, std::memory_order_release);
    return why;
}

template <class Ready>
xmc_status Board::wait(int peer, bool vote, Ready &&ready) {
    // Peers are usually microseconds apart: spin first, then yield the core (a 2-core machine may
    // run four ranks), then sleep, up to the bound.
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto deadline = start + std::chrono::milliseconds(timeout_ms_);
    // A message's peer that already published this rank's next vote round left the exchange (its
    // own call failed): waiting on is pointless, and its vote says why (the caller sees ready()
    // still false and fails the message; the completion vote follows at once).
    const uint64_t next = round_ + 1;
    for (uint32_t spins = 0;; ++spins) {
        if (ready()) return XMC_OK;
        if (!vote && slot(peer, int(next & 1)).seq.load(std::memory_order_acquire) == next) return XMC_OK;
        if (spins < 2000) continue;
        if (slot(peer, 0).seq.load(std::memory_order_acquire) == kPoisoned) return poison(XMC_ERR_PEER_FAILED);
        const auto now = clock::now();
        // A vote given up on poisons the board; a message not taken in time does not: the
        // completion vote after it still tells every rank why (a peer whose own driver call
        // failed stopped receiving: its native code reaches this rank there).
        if (now >= deadline) return vote ? poison(XMC_ERR_TIMEOUT) : XMC_ERR_TIMEOUT;
        if (now - start < std::chrono::milliseconds(1)) ::sched_yield();
        else std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
}

xmc_status Board::gather(const void *mine, void *all, size_t bytes) {
    if (bytes <= kPayload) return gather_round(mine, all, bytes);
    // Larger contributions (path IPC's descriptors, 376 bytes: a reconnection over the board once
    // failed on them) go in slot-sized pieces, a round each; every rank gives the same size.
    std::vector<char> piece(kPayload * size_t(size_));
    for (size_t at = 0; at < bytes; at += kPayload) {
        const size_t n = std::min(kPayload, bytes - at);
        if (xmc_status s = gather_round(static_cast<const char *>(mine) + at, piece.data(), n); s != XMC_OK) return s;
        for (int p = 0; p < size_; ++p)
            std::memcpy(static_cast<char *>(all) + size_t(p) * bytes + at, piece.data() + size_t(p) * n, n);
    }
    return XMC_OK;
}

xmc_status Board::gather_round(const void *mine, void *all, size_t bytes) {
    if (broken_) return XMC_ERR_PEER_FAILED;
    const uint64_t k = ++round_;
    const int parity = int(k & 1);
    Slot &own = slot(me_, parity);
    std::memcpy(own.payload, mine, bytes);
    own.seq.store(k, std::memory_order_release);
    std::memcpy(static_cast<char *>(all) + size_t(me_) * bytes, mine, bytes);
    for (int p = 0; p < size_; ++p) {
        if (p == me_) continue;
        Slot &s = slot(p, parity);
        bool ahead = false;  // two rounds ahead: a peer that did not skip what this rank skipped, or broken
        const xmc_status st = wait(p, true, [&] {
            const uint64_t seen = s.seq.load(std::memory_order_acquire);
            ahead = seen > k;
            return seen >= k;
        });
        if (st != XMC_OK) return st;
        if (ahead) return poison(XMC_ERR_PEER_FAILED);
        std::memcpy(static_cast<char *>(all) + size_t(p) * bytes, s.payload, bytes);
    }
    return XMC_OK;
}

xmc_status Board::send(int peer, const void *buf, size_t bytes, uint64_t tag) {
    if (broken_ || peer < 0 || peer >= size_ || peer == me_) return XMC_ERR_PEER_FAILED;
    Ring &r = ring(me_, peer);
    const char *from = static_cast<const char *>(buf);
    size_t at = 0;
    do {  // a message of 0 bytes is one empty piece
        const uint64_t n = r.sent.load(std::memory_order_relaxed);
        if (xmc_status s = wait(peer, false, [&] { return n - r.taken.load(std::memory_order_acquire) < kPieces; }); s != XMC_OK)
            return s;
        if (n - r.taken.load(std::memory_order_acquire) >= kPieces) return XMC_ERR_PEER_FAILED;  // it moved on
        auto &piece = r.pieces[n % kPieces];
        piece.tag = tag, piece.message = bytes, piece.offset = at, piece.len = std::min(kPiece, bytes - at);
        std::memcpy(piece.data, from + at, piece.len);
        at += piece.len;
        r.sent.store(n + 1, std::memory_order_release);
    } while (at < bytes);
    return XMC_OK;
}

xmc_status Board::recv(int peer, void *buf, size_t bytes, uint64_t tag) {
    if (broken_ || peer < 0 || peer >= size_ || peer == me_) return XMC_ERR_PEER_FAILED;
    Ring &r = ring(peer, me_);
    char *to = static_cast<char *>(buf);
    size_t at = 0;
    do {
        const uint64_t n = r.taken.load(std::memory_order_relaxed);
        if (xmc_status s = wait(peer, false, [&] { return r.sent.load(std::memory_order_acquire) > n; }); s != XMC_OK) return s;
        if (r.sent.load(std::memory_order_acquire) <= n) return XMC_ERR_PEER_FAILED;  // it moved on
        const auto &piece = r.pieces[n % kPieces];
        // The sender's message must be the one expected here, piece by piece (a rank out of step).
        if (piece.tag != tag || piece.message != bytes || piece.offset != at || piece.len > bytes - at ||
            (piece.len == 0 && bytes != 0))
            return poison(XMC_ERR_PEER_FAILED);
        std::memcpy(to + at, piece.data, piece.len);
        at += piece.len;
        r.taken.store(n + 1, std::memory_order_release);
    } while (at < bytes);
    return XMC_OK;
}

// ---- which board each group has ----

namespace {

// A group as this rank knows it: its transport, its position and its labels. (Two groups that
// differ in any of these never share a board; one at a reused address with the same ranks may,
// and the run votes then confirm that every rank holds the same board.)
using GroupKey = std::tuple<const void *, const void *, int, std::vector<int32_t>>;

GroupKey key_of(const xmc_group *g) {
    return {g->transport->ctx, reinterpret_cast<const void *>(g->transport->all_gather), g->my_index,
            std::vector<int32_t>(g->ranks, g->ranks + g->size)};
}

struct Boards {
    std::mutex mu;
    std::map<GroupKey, std::weak_ptr<Board>> of;
};
Boards &boards() {
    static Boards *b = new Boards;  // never destroyed: a release at exit may still look
    return *b;
}

}  // namespace

std::shared_ptr<Board> group_board(const xmc_group *g) {
    Boards &b = boards();
    std::lock_guard<std::mutex> lk(b.mu);
    auto it = b.of.find(key_of(g));
    if (it == b.of.end()) return nullptr;
    std::shared_ptr<Board> live = it->second.lock();
    if (!live) b.of.erase(it);
    return live && !live->broken() ? live : nullptr;
}

std::shared_ptr<Board> new_group_board(const xmc_group *g, uint64_t name, std::string *why) {
    std::shared_ptr<Board> nb = Board::open(name, g->size, g->my_index, why);
    Boards &b = boards();
    std::lock_guard<std::mutex> lk(b.mu);
    if (nb) b.of[key_of(g)] = nb;
    else b.of.erase(key_of(g));
    return nb;
}

}  // namespace xmc::transfer
