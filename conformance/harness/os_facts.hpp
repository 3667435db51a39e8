// What the operating system says about memory, read independently of any
// backend: the suite never takes a backend's word for what it checks.
#pragma once
#include <cstddef>
#include <cstdint>

namespace xmc::conformance {

struct LockState {
    bool all_locked = false;  // every mapping overlapping the range is VM_LOCKED
    bool any_locked = false;
    bool any_mapped = false;
};

// From /proc/self/smaps (VmFlags "lo").
LockState lock_state(const void *addr, size_t len);
size_t page_size();
// Bytes the C heap holds for the program (in use + mmapped), from mallinfo2.
size_t heap_bytes_in_use();

// Why page locking cannot be observed in this build, or nullptr when it can.
// The sanitizer runtimes (ASan, TSan; sanitizer_common's interceptors) turn
// mlock/munlock into no-ops that return success, so pages are never locked and
// RLIMIT_MEMLOCK is never hit: a check of lock state or of the memlock limit
// must then be skipped with this reason (XMC_SKIP_IF_MLOCK_IGNORED), never pass.
// XMC_SKIP_IF_MLOCK_IGNORED declares the skip unsupported, with this reason.
const char *mlock_ignored_reason();

} // namespace xmc::conformance

// In a test body (fixture.hpp included): a declared skip where mlock is a no-op.
#define XMC_SKIP_IF_MLOCK_IGNORED()                                                        \
    do {                                                                                   \
        if (const char *xmc_why_ = ::xmc::conformance::mlock_ignored_reason())             \
            XMC_SKIP(::xmc::conformance::SkipKind::Unsupported, xmc_why_);                  \
    } while (0)
