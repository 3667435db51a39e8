// A group's board: a transport in POSIX shared memory for the ranks of one node, so that a
// prepared transfer's runs are synchronised by flags in shared memory instead of round trips over
// the group's transport, and its staged bytes cross by two memory copies instead of TCP (SPEC 3,
// transfer_prepared: "within a node a flag in shared or device memory"; issue 29: on one H200
// host a gloo all_gather took 62-79 us, a shared-memory flag 0.34 us, and the staged path between
// two processes ran at 0.8-2.7 GB/s over TCP).
//
// all_gather: each rank has two slots (rounds alternate between them) of a sequence number and a
// payload. Round k: a rank writes its payload into its slot k % 2, then publishes k as the slot's
// sequence number, and waits until every peer's slot k % 2 shows k. A rank can publish round k + 1
// (the other slot) only after every peer published k, and round k + 2 (this slot again) only after
// every peer published k + 1, which each does after reading round k: so a slot is never rewritten
// while a peer may still read it. Rounds are counted per rank, as a transport counts its calls: a
// rank that skipped a gather meets its peers' next one (their votes then disagree, and refuse).
//
// send/recv: one ring per ordered pair of ranks, of kPieces pieces of kPiece bytes, with the
// sender's count of pieces published and the receiver's of pieces taken (one writer each). A
// message goes piece by piece, each with its tag and size, which the receiver checks; the sender
// copies the next piece in while the receiver copies the last one out.
//
// A board whose vote timed out, or that found a peer out of step or broken, is broken: it is never
// used again, its slots say so to the peers (which then fail at once instead of reading a vote it
// gave up on or waiting out their bound), and the group's next run votes over the group's
// transport and makes a new one. A message not taken in time only fails its call; the run's
// completion vote still goes over the board, and a run that failed retires it on every rank. Which board a group uses is agreed in the run votes (transfer_prepared.cpp).
#pragma once
#include <xmc/backend.h>

#include <cstdint>
#include <memory>
#include <string>

namespace xmc::transfer {

class Board {
public:
    static constexpr size_t kPayload = 256;        // a slot: larger all_gather contributions take several rounds
    static constexpr size_t kPiece = size_t{256} << 10;
    static constexpr uint64_t kPieces = 4;
    // Opens (creating where it is the first) the board `name` of `size` ranks at position `me`.
    // NULL with *why set when shared memory cannot be had.
    static std::shared_ptr<Board> open(uint64_t name, int size, int me, std::string *why);
    ~Board();
    Board(const Board &) = delete;
    Board &operator=(const Board &) = delete;

    // The board as the group's transport ("shared memory"), every operation bounded by timeout_ms.
    const xmc_transport *transport(uint32_t timeout_ms);
    // Each returns 0, XMC_ERR_TIMEOUT when a peer did not come within the bound, or
    // XMC_ERR_PEER_FAILED when it is out of step or broke; the board is broken after either.
    xmc_status gather(const void *mine, void *all, size_t bytes);
    xmc_status send(int peer, const void *buf, size_t bytes, uint64_t tag);
    xmc_status recv(int peer, void *buf, size_t bytes, uint64_t tag);
    // Every rank has it open (all voted to use it): its name may go, so that nothing is left in
    // /dev/shm by a process that ends without closing it.
    void unlink();
    // A run on it failed (every rank learns that in the same vote): its rings may hold a message
    // nobody takes, so it is not used again; the group's next run makes a new one.
    void retire() { broken_ = true; }
    uint64_t name() const { return name_; }
    bool broken() const { return broken_; }

private:
    struct Slot;
    struct Ring;
    static constexpr uint64_t kPoisoned = ~uint64_t{0};  // a broken board's rounds, as its peers see them
    Board(uint64_t name, int size, int me, char *base, size_t bytes);
    Slot &slot(int rank, int parity);
    Ring &ring(int from, int to);
    // Waits until ready() or the bound (a vote's poisons the board), failing early when `peer`'s
    // board broke.
    template <class Ready>
    xmc_status wait(int peer, bool vote, Ready &&ready);
    xmc_status poison(xmc_status why);
    xmc_status gather_round(const void *mine, void *all, size_t bytes);  // bytes <= kPayload
    uint64_t name_;
    int size_, me_;
    char *base_;
    size_t bytes_;
    uint32_t timeout_ms_ = 0;
    uint64_t round_ = 0;
    bool broken_ = false, unlinked_ = false;
    xmc_transport tp_{};
};

// The board this rank holds for group g (the group's transport, position and labels), NULL when
// it has none, or it broke. The prepared transfers that use a board hold it; it goes with the last.
std::shared_ptr<Board> group_board(const xmc_group *g);
// Makes a new board named `name` g's board (NULL with *why set when it cannot be opened).
std::shared_ptr<Board> new_group_board(const xmc_group *g, uint64_t name, std::string *why);

}  // namespace xmc::transfer
