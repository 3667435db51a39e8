// The pinning oracle (SPEC 5, PIN-*): a pure state machine that says, for any
// operation in any state, the expected status and the next state. It never
// touches memory. Blocks are named by allocation order; the system under test
// owns the real addresses and sizes, so an address is given as a block plus
// an offset from the block's start or from its (real) end.
#pragma once
#include <xmc/backend.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace xmc::model {

// Base + delta, delta in [0, bytes asked): inside the block.
// End + delta, delta >= 0: at or past the block's real end, so outside it.
// Unknown: memory no block ever held.
struct PinAddr {
    enum Anchor { Base, End, Unknown };
    int block = -1;
    Anchor anchor = Unknown;
    uint64_t delta = 0;
};

struct PinModelBlock {
    size_t bytes = 0;        // as asked; the real size is >= this
    // PIN-AFTER-FREE: a block that is not live reports not pinned;
    // PIN-ACCOUNT: and counts in no byte total.
    bool live = false;
    bool owner = false;      // the allocation's own reference (dropped by free)
    uint32_t refs = 0;       // references taken with ref
    // PIN-POOL: freed into the pool: not live (not pinned, in no live total)
    // but its pages stay locked until the pool is released. Its memory may
    // have been handed out again since, to a block the model names anew.
    bool pooled = false;
};

// What the backend declares about its pinning (PIN-KINDS), fixed for a run.
struct PinRules {
    bool pool = false;          // pin_cache: free hands a block to the pool
    bool driver = false;        // pin_driver: pages locked by the driver, not mlock
    size_t min_alignment = 4096;  // pin_min_alignment: every block is this aligned
};

// PIN-THREADS: a thread's own blocks follow this machine alone; concurrency
// adds no rule (the test gives each thread a model and checks the totals
// between rounds).
class PinModel {
public:
    PinModel() = default;
    explicit PinModel(const PinRules &rules) : rules_(rules) {}
    const PinRules &rules() const { return rules_; }

    // PIN-ALLOC: n > 0 and a power-of-two alignment. PIN-FAIL-CLEAN: a size
    // near the top of the address space (above 2^63, or from a petabyte up)
    // is refused, and nothing changes: no block is added. The refusal's
    // status is the backend's (out of memory, memlock, too large, or invalid
    // when it overflows rounding); the model answers XMC_ERR_OUT_OF_MEMORY and
    // refusal_matches() accepts any of them.
    xmc_status alloc(size_t bytes, size_t alignment);
    // Is `got` the outcome the model's `want` allows? Equal, or both refusals
    // of PIN-FAIL-CLEAN's kind.
    static bool refusal_matches(xmc_status want, xmc_status got);
    static bool is_refusal(xmc_status s);  // the statuses of a refused allocation
    static constexpr uint64_t kRefusedFrom = uint64_t{1} << 50;  // a petabyte
    // PIN-KINDS: an alignment up to the declared minimum is always honoured
    // (a block has it anyway); above it a backend may refuse (invalid
    // argument), never weaken it, so the model cannot say which.
    bool alignment_honoured(size_t alignment) const { return alignment <= rules_.min_alignment; }
    // PIN-FREE: exactly a live base whose owner reference is held.
    xmc_status free(const PinAddr &a);
    // PIN-REFS: ref through any address inside a live block.
    xmc_status ref(const PinAddr &a);
    // PIN-REFS: drop a taken reference; the block goes with its last reference.
    xmc_status unref(const PinAddr &a);
    // PIN-QUERY: is [a, a+len) inside one live block? `real_size` is the size
    // the system reported for a.block (the model only knows a lower bound).
    bool query(const PinAddr &a, size_t len, size_t real_size) const;

    // PIN-QUERY over real addresses: the live block (by the model) whose real
    // range [base, base+size) holds all of [addr, addr+len), or -1. `real`
    // gives each block's real base and size, in allocation order. Needed
    // because a freed block's memory, or the bytes past a block's end, may
    // belong to another live block.
    int containing_block(uint64_t addr, uint64_t len,
                         const std::vector<std::pair<uint64_t, uint64_t>> &real) const;

    // PIN-POOL: releasing the pool unpins every pooled block and no live one.
    // Returns how many blocks the model knew pooled (some may have been
    // handed out again since, which the backend knows and the model not).
    size_t pool_release();
    // PIN-CLOSE: closing the last open instance releases every block still
    // allocated, references notwithstanding, and the pool; returns how many
    // live blocks it released. Closing another instance changes nothing.
    size_t close(bool last);
    // PIN-POOL, PIN-AFTER-FREE: the pages of a live or pooled block are
    // locked (by the declared method); of any other, not.
    bool expect_locked(int block) const;

    const std::vector<PinModelBlock> &blocks() const { return blocks_; }
    size_t live_blocks() const;
    size_t pooled_blocks() const;

private:
    // The last reference went: pooled under pin_cache, else gone.
    void drop(PinModelBlock &b);
    PinRules rules_;
    // Is a inside a live block? Decidable without the real size, by the
    // PinAddr rules above.
    bool inside(const PinAddr &a) const;
    std::vector<PinModelBlock> blocks_;
};

} // namespace xmc::model
