// Tracked: one rank's side of a prepared transfer moved into memory the backend tracks, freed and
// allocated again between runs (AFF-PREPARED-STALE and the model sequences of
// test_transfer_prepared.cpp, its one user).
#pragma once
#include "transfer_tests.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace xmc::conformance {

// A side moved into a dev_alloc allocation (the backend tracks it): a device backend's side is
// there already; a host backend's image is copied into its host "device" memory. replace() frees
// it and allocates the same size again, filled with kMark (most often at the same address: a new
// allocation where the prepared one was).
constexpr uint8_t kMark = 0xee;
struct Tracked {
    const PreparedCall &pc;
    Side &side;
    void *own = nullptr;  // the host backend's allocation
    size_t bytes = 0;
    bool moved = false, same_address = false;
    // `replaced`: the side whose allocation replace() will swap.
    Tracked(const PreparedCall &pc, Side &side, bool replaced) : pc(pc), side(side), bytes(side.store.size()) {
        if (!side.buf.ptr || side.dev) return;
        // Host memory above glibc's largest mmap threshold (32 MiB) always comes from mmap, which
        // hands a freed range back at once (smaller aligned blocks came back elsewhere every
        // time): the replacement lands on the old address.
        if (replaced) bytes = std::max(bytes, size_t{33} << 20);
        if (pc.api->dev_alloc(pc.inst, 0, bytes, &own) != XMC_OK) return;
        std::memcpy(own, side.store.data(), side.store.size());
        side.buf.ptr = own;
        moved = true;
    }
    bool usable() const { return !side.buf.ptr || side.dev || moved; }
    void *ptr() const { return side.dev ? side.dev : own; }
    bool replace() {
        void *old = ptr();
        if (!old) return true;
        if (pc.api->dev_free(pc.inst, old) != XMC_OK) return false;
        if (side.dev) side.dev = nullptr;
        else own = nullptr;
        // The allocator gives the freed block back most often, not always: allocations that miss
        // are held while it tries again, so that the new allocation lands where the old one was.
        std::vector<void *> missed;
        void *fresh = nullptr;
#if defined(__SANITIZE_ADDRESS__)
        constexpr int kTries = 1;  // ASan's quarantine holds the freed block: 64 tries of 33 MiB cost seconds
#else
        constexpr int kTries = 64;
#endif
        for (int tries = 0; tries < kTries && fresh != old; ++tries) {
            if (fresh) missed.push_back(fresh);
            if (pc.api->dev_alloc(pc.inst, pc.mem.ordinal, bytes, &fresh) != XMC_OK) return false;
        }
        for (void *m : missed) pc.api->dev_free(pc.inst, m);
        same_address = fresh == old;
        if (pc.mem.device) side.dev = fresh;
        else own = fresh;
        fill(kMark);
        return true;
    }
    void fill(uint8_t v) {
        std::vector<uint8_t> img(bytes, v);
        if (own) std::memcpy(own, img.data(), bytes);  // (the image's first bytes: all of it, or more)
        else if (side.dev) std::copy(img.begin(), img.end(), side.store.begin()), side.upload();
    }
    // The new allocation still all kMark (nothing read it into a target, nothing wrote it).
    bool untouched() {
        if (own) return std::all_of(static_cast<uint8_t *>(own), static_cast<uint8_t *>(own) + bytes,
                                    [](uint8_t b) { return b == kMark; });
        if (!side.dev) return true;
        side.fetch();
        return std::all_of(side.store.begin(), side.store.end(), [](uint8_t b) { return b == kMark; });
    }
    ~Tracked() {
        if (!own) return;
        if (side.buf.ptr == own) {  // the image back where the checks read it
            std::memcpy(side.store.data(), own, side.store.size());
            side.buf.ptr = side.store.data();
        }
        pc.api->dev_free(pc.inst, own);
    }
};

}  // namespace xmc::conformance
