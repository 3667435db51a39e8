// A group's vote board: an all_gather through POSIX shared memory, for the ranks of one node, so
// that a prepared transfer's run is synchronised by flags in shared memory instead of two
// round trips over the group's transport (SPEC 3, transfer_prepared: "within a node a flag in
// shared or device memory"). (One H200 host: a gloo all_gather took 62-79 us, a shared-memory flag 0.34 us.)
//
// Each rank has two slots (rounds alternate between them) of a sequence number and a payload.
// Round k: a rank writes its payload into its slot k % 2, then publishes k as the slot's sequence
// number, and waits until every peer's slot k % 2 shows k. A rank can publish round k + 1 (the
// other slot) only after every peer published k, and round k + 2 (this slot again) only after
// every peer published k + 1, which each does after reading round k: so a slot is never rewritten
// while a peer may still read it. Rounds are counted per rank, as a transport counts its calls:
// a rank that skipped a gather meets its peers' next one (their votes then disagree, and refuse).
//
// A board that timed out, or saw a peer two rounds ahead or broken, is broken: it is never used
// again (its rounds no longer line up), its slots say so to the peers (which then break too, at
// once, instead of reading a vote it gave up on), and the group's next run votes over the
// transport again and makes a new one. Which board a group uses is agreed in the run votes (transfer_prepared.cpp).
#pragma once
#include <xmc/backend.h>

#include <cstdint>
#include <memory>
#include <string>

namespace xmc::transfer {

class Board {
public:
    static constexpr size_t kPayload = 256;  // the largest vote a board carries
    // Opens (creating where it is the first) the board `name` of `size` ranks at position `me`.
    // NULL with *why set when shared memory cannot be had.
    static std::shared_ptr<Board> open(uint64_t name, int size, int me, std::string *why);
    ~Board();
    Board(const Board &) = delete;
    Board &operator=(const Board &) = delete;

    // all_gather over the board: `bytes` (<= kPayload) of `mine` from every rank into `all`, in
    // group order. 0, XMC_ERR_TIMEOUT when a peer did not come within timeout_ms, or
    // XMC_ERR_PEER_FAILED when the rounds no longer line up; the board is broken after either.
    xmc_status gather(const void *mine, void *all, size_t bytes, uint32_t timeout_ms);
    // Every rank has it open (all voted to use it): its name may go, so that nothing is left in
    // /dev/shm by a process that ends without closing it.
    void unlink();
    uint64_t name() const { return name_; }
    bool broken() const { return broken_; }

private:
    struct Slot;
    static constexpr uint64_t kPoisoned = ~uint64_t{0};  // a broken board's rounds, as its peers see them
    void poison();
    Board(uint64_t name, int size, int me, Slot *slots, size_t bytes);
    uint64_t name_;
    int size_, me_;
    Slot *slots_;
    size_t bytes_;
    uint64_t round_ = 0;
    bool broken_ = false, unlinked_ = false;
};

// The board this rank holds for group g (the group's transport, position and labels), NULL when
// it has none or it broke.
std::shared_ptr<Board> group_board(const xmc_group *g);
// Replaces g's board by a new one named `name` (opened now; NULL with *why set when it cannot be).
std::shared_ptr<Board> new_group_board(const xmc_group *g, uint64_t name, std::string *why);

}  // namespace xmc::transfer
