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
};

// PIN-THREADS: a thread's own blocks follow this machine alone; concurrency
// adds no rule (the test gives each thread a model and checks the totals
// between rounds).
class PinModel {
public:
    // PIN-ALLOC: n > 0 and a power-of-two alignment.
    xmc_status alloc(size_t bytes, size_t alignment);
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

    const std::vector<PinModelBlock> &blocks() const { return blocks_; }
    size_t live_blocks() const;

private:
    // Is a inside a live block? Decidable without the real size, by the
    // PinAddr rules above.
    bool inside(const PinAddr &a) const;
    std::vector<PinModelBlock> blocks_;
};

} // namespace xmc::model
