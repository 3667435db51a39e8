#include "pin_model.hpp"

namespace xmc::model {

xmc_status PinModel::alloc(size_t bytes, size_t alignment) {
    // PIN-ALLOC: n = 0 or a non-power-of-two alignment is invalid.
    if (bytes == 0 || alignment == 0 || (alignment & (alignment - 1)) != 0)
        return XMC_ERR_INVALID_ARGUMENT;
    blocks_.push_back(PinModelBlock{bytes, true, true, 0});
    return XMC_OK;
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
    // PIN-AFTER-FREE: with no reference left the block is gone;
    // PIN-REFS: with references left it stays live.
    if (b.refs == 0) b.live = false;
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
    if (--b.refs == 0 && !b.owner) b.live = false;     // the last reference frees
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

size_t PinModel::live_blocks() const {
    size_t n = 0;
    // PIN-ACCOUNT: the live blocks are the ones bytes_now sums.
    for (const auto &b : blocks_) n += b.live ? 1 : 0;
    return n;
}

} // namespace xmc::model
