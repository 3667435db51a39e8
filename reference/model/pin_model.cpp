#include "pin_model.hpp"

namespace xmc::model {

xmc_status PinModel::alloc(size_t bytes, size_t alignment) {
    // PIN-ALLOC: n = 0 or a non-power-of-two alignment is invalid.
    if (bytes == 0 || alignment == 0 || (alignment & (alignment - 1)) != 0)
        return XMC_ERR_INVALID_ARGUMENT;
    // PIN-FAIL-CLEAN: refused, and the refusal changes nothing.
    if (bytes >= kRefusedFrom) return XMC_ERR_OUT_OF_MEMORY;
    blocks_.push_back(PinModelBlock{bytes, true, true, 0, false});
    return XMC_OK;
}

bool PinModel::is_refusal(xmc_status s) {
    // PIN-FAIL-CLEAN: its own status, whichever the cause: the memlock limit,
    // the memory or a per-call limit the platform refuses, the driver, or a
    // size that overflows when rounded up.
    return s == XMC_ERR_OUT_OF_MEMORY || s == XMC_ERR_MEMLOCK || s == XMC_ERR_TOO_LARGE || s == XMC_ERR_DRIVER ||
           s == XMC_ERR_INVALID_ARGUMENT;
}

bool PinModel::refusal_matches(xmc_status want, xmc_status got) {
    if (want == got) return true;
    return want == XMC_ERR_OUT_OF_MEMORY && is_refusal(got);
}

void PinModel::drop(PinModelBlock &b) {
    // PIN-AFTER-FREE: with no reference left the block is gone;
    // PIN-POOL: under pin_cache it goes to the pool, its pages still locked.
    b.live = false;
    b.pooled = rules_.pool;
}

bool PinModel::inside(const PinAddr &a) const {
    if (a.anchor != PinAddr::Base || a.block < 0 || static_cast<size_t>(a.block) >= blocks_.size())
        return false;
    const PinModelBlock &b = blocks_[a.block];
    return b.live && a.delta < b.bytes;
}

xmc_status PinModel::free(const PinAddr &a) {
    // PIN-FREE: interior, unknown or second free: refused, nothing changes.
    // Exactly the base, of a block whose owner reference is still held.
    if (!inside(a) || a.delta != 0 || !blocks_[a.block].owner) return XMC_ERR_NOT_PINNED_BASE;
    PinModelBlock &b = blocks_[a.block];
    b.owner = false;
    // PIN-REFS: with references left it stays live.
    if (b.refs == 0) drop(b);
    return XMC_OK;
}

xmc_status PinModel::ref(const PinAddr &a) {
    if (!inside(a)) return XMC_ERR_NOT_PINNED_BASE;
    // PIN-REFS: a reference through any address inside a live block counts.
    ++blocks_[a.block].refs;
    return XMC_OK;
}

xmc_status PinModel::unref(const PinAddr &a) {
    if (!inside(a)) return XMC_ERR_NOT_PINNED_BASE;
    PinModelBlock &b = blocks_[a.block];
    if (b.refs == 0) return XMC_ERR_INVALID_ARGUMENT;  // no taken reference to drop
    // PIN-REFS: released only with the last reference, the owner's included.
    if (--b.refs == 0 && !b.owner) drop(b);            // the last reference frees
    return XMC_OK;
}

bool PinModel::query(const PinAddr &a, size_t len, size_t real_size) const {
    // PIN-QUERY: inside a live block is pinned; base+n and beyond are not.
    // Pinned only when the whole extent lies in the block, not just its start.
    const uint64_t n = len == 0 ? 1 : len;
    return inside(a) && a.delta + n <= real_size;
}

int PinModel::containing_block(uint64_t addr, uint64_t len,
                               const std::vector<std::pair<uint64_t, uint64_t>> &real) const {
    const uint64_t n = len == 0 ? 1 : len;
    if (addr > UINT64_MAX - n) return -1;
    for (size_t i = 0; i < blocks_.size() && i < real.size(); ++i)
        if (blocks_[i].live && real[i].first <= addr && addr + n <= real[i].first + real[i].second)
            return static_cast<int>(i);
    return -1;
}

size_t PinModel::pool_release() {
    size_t n = 0;
    // PIN-POOL: every pooled block unpinned; live ones untouched. Then
    // PIN-AFTER-FREE holds for each (expect_locked is false).
    for (auto &b : blocks_) {
        n += b.pooled ? 1 : 0;
        b.pooled = false;
    }
    return n;
}

size_t PinModel::close(bool last) {
    // PIN-CLOSE: another instance still open can reach every block: nothing goes.
    if (!last) return 0;
    size_t n = 0;
    // The last close: every live block, whatever its references, and the pool.
    for (auto &b : blocks_) {
        n += b.live ? 1 : 0;
        b = PinModelBlock{b.bytes, false, false, 0, false};
    }
    return n;
}

bool PinModel::expect_locked(int block) const {
    if (block < 0 || static_cast<size_t>(block) >= blocks_.size()) return false;
    return blocks_[block].live || blocks_[block].pooled;
}

size_t PinModel::pooled_blocks() const {
    size_t n = 0;
    for (const auto &b : blocks_) n += b.pooled ? 1 : 0;
    return n;
}

size_t PinModel::live_blocks() const {
    size_t n = 0;
    // PIN-ACCOUNT: the live blocks are the ones bytes_now sums.
    for (const auto &b : blocks_) n += b.live ? 1 : 0;
    return n;
}

} // namespace xmc::model
