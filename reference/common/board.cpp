// The group's vote board (board.hpp): slots in POSIX shared memory, and which board each group has.
#include "board.hpp"

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
    std::atomic<uint64_t> seq;  // the round whose payload this slot holds (0: none yet)
    char pad[56];
    char payload[kPayload];
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
    const size_t bytes = sizeof(Slot) * 2 * size_t(size);
    const int fd = ::shm_open(path.c_str(), O_CREAT | O_RDWR, 0600);
    if (fd < 0) {
        *why = "shm_open(" + path + ") failed: " + std::strerror(errno);
        return nullptr;
    }
    // Every rank sizes it; a new object reads as zeros (no round yet), a resize to the same size
    // changes nothing.
    void *m = ::ftruncate(fd, off_t(bytes)) == 0 ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                                                 : MAP_FAILED;
    const int err = errno;
    ::close(fd);
    if (m == MAP_FAILED) {
        *why = "sizing or mapping " + path + " failed: " + std::strerror(err);
        ::shm_unlink(path.c_str());
        return nullptr;
    }
    return std::shared_ptr<Board>(new Board(name, size, me, static_cast<Slot *>(m), bytes));
}

Board::Board(uint64_t name, int size, int me, Slot *slots, size_t bytes)
    : name_(name), size_(size), me_(me), slots_(slots), bytes_(bytes) {}

Board::~Board() {
    unlink();
    ::munmap(slots_, bytes_);
}

void Board::unlink() {
    if (unlinked_) return;
    unlinked_ = true;
    ::shm_unlink(shm_name(name_).c_str());  // ENOENT: a peer did it first
}

xmc_status Board::gather(const void *mine, void *all, size_t bytes, uint32_t timeout_ms) {
    if (broken_ || bytes > kPayload) return XMC_ERR_PEER_FAILED;
    const uint64_t k = ++round_;
    const int parity = int(k & 1);
    Slot &own = slots_[2 * me_ + parity];
    std::memcpy(own.payload, mine, bytes);
    own.seq.store(k, std::memory_order_release);
    std::memcpy(static_cast<char *>(all) + size_t(me_) * bytes, mine, bytes);
    // Peers are usually microseconds apart: spin first, then yield the core (a 2-core machine may
    // run four ranks), then sleep, up to the group's bound.
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto deadline = start + std::chrono::milliseconds(timeout_ms);
    for (int p = 0; p < size_; ++p) {
        if (p == me_) continue;
        Slot &s = slots_[2 * p + parity];
        for (uint32_t spins = 0;; ++spins) {
            const uint64_t seen = s.seq.load(std::memory_order_acquire);
            if (seen == k) break;
            if (seen > k) {  // two rounds ahead (a peer that did not skip what this rank skipped), or broken
                poison();
                return XMC_ERR_PEER_FAILED;
            }
            if (spins < 2000) continue;
            const auto now = clock::now();
            if (now >= deadline) {
                poison();
                return XMC_ERR_TIMEOUT;
            }
            if (now - start < std::chrono::milliseconds(1)) ::sched_yield();
            else std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
        std::memcpy(static_cast<char *>(all) + size_t(p) * bytes, s.payload, bytes);
    }
    return XMC_OK;
}

void Board::poison() {
    broken_ = true;
    // A peer that waits for this rank, or comes late to a round this rank gave up on, then fails
    // at once instead of reading a vote this rank no longer stands by.
    for (int parity = 0; parity < 2; ++parity) slots_[2 * me_ + parity].seq.store(kPoisoned, std::memory_order_release);
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
    std::map<GroupKey, std::shared_ptr<Board>> of;
};
Boards &boards() {
    static Boards b;  // destroyed at exit: the boards' names go with them
    return b;
}

}  // namespace

std::shared_ptr<Board> group_board(const xmc_group *g) {
    Boards &b = boards();
    std::lock_guard<std::mutex> lk(b.mu);
    auto it = b.of.find(key_of(g));
    return it == b.of.end() || it->second->broken() ? nullptr : it->second;
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
