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

} // namespace xmc::conformance
