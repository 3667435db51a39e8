// An ordered index of pinned blocks by base address: a sorted array of sorted
// buckets (a B-tree of depth two). Lookups are two binary searches over
// contiguous memory, so a query stays cheap with 100,000 live blocks, where a
// node-based std::map misses the cache at every level.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace xmc::be {

template <class Block>  // Block has `uintptr_t base` and `size_t size`
class BlockIndex {
public:
    // PIN-QUERY: the lookup of every query, free and ref: two binary searches.
    // The block whose [base, base+size) holds addr, or nullptr.
    Block *find_containing(uintptr_t addr) {
        if (firsts_.empty()) return nullptr;
        size_t b = bucket_for(addr);
        auto &v = buckets_[b];
        size_t lo = 0, hi = v.size();  // first element with base > addr
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (v[mid].base <= addr) lo = mid + 1; else hi = mid;
        }
        if (lo == 0) return nullptr;
        Block &blk = v[lo - 1];
        return addr < blk.base + blk.size ? &blk : nullptr;
    }
    Block *find(uintptr_t base) {
        Block *b = find_containing(base);
        return b && b->base == base ? b : nullptr;
    }
    void insert(const Block &blk) {
        if (firsts_.empty()) {
            buckets_.push_back({blk});
            firsts_.push_back(blk.base);
            ++count_;
            return;
        }
        size_t b = bucket_for(blk.base);
        auto &v = buckets_[b];
        size_t i = 0;
        while (i < v.size() && v[i].base < blk.base) ++i;  // buckets are short
        v.insert(v.begin() + static_cast<std::ptrdiff_t>(i), blk);
        firsts_[b] = v.front().base;
        ++count_;
        if (v.size() > 2 * kBucket) {  // split in two halves
            std::vector<Block> upper(v.begin() + kBucket, v.end());
            v.resize(kBucket);
            buckets_.insert(buckets_.begin() + static_cast<std::ptrdiff_t>(b) + 1, std::move(upper));
            firsts_.insert(firsts_.begin() + static_cast<std::ptrdiff_t>(b) + 1, buckets_[b + 1].front().base);
        }
    }
    // Removes the block starting exactly at base; false if there is none.
    bool erase(uintptr_t base) {
        if (firsts_.empty()) return false;
        size_t b = bucket_for(base);
        auto &v = buckets_[b];
        for (size_t i = 0; i < v.size(); ++i) {
            if (v[i].base != base) continue;
            v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
            --count_;
            if (v.empty()) {
                buckets_.erase(buckets_.begin() + static_cast<std::ptrdiff_t>(b));
                firsts_.erase(firsts_.begin() + static_cast<std::ptrdiff_t>(b));
            } else {
                firsts_[b] = v.front().base;
            }
            return true;
        }
        return false;
    }
    size_t size() const { return count_; }
    // Every block, in base order (PIN-CLOSE: the last close walks them all).
    std::vector<Block> all() const {
        std::vector<Block> v;
        v.reserve(count_);
        for (const auto &bucket : buckets_) v.insert(v.end(), bucket.begin(), bucket.end());
        return v;
    }

private:
    static constexpr size_t kBucket = 256;
    // The last bucket whose first base is <= addr (bucket 0 if none).
    size_t bucket_for(uintptr_t addr) const {
        size_t lo = 0, hi = firsts_.size();
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (firsts_[mid] <= addr) lo = mid + 1; else hi = mid;
        }
        return lo == 0 ? 0 : lo - 1;
    }
    std::vector<std::vector<Block>> buckets_;
    std::vector<uintptr_t> firsts_;  // firsts_[i] == buckets_[i].front().base
    size_t count_ = 0;
};

} // namespace xmc::be
