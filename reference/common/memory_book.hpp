// The memory a backend can see come and go, process-wide: its pinned blocks, registrations, device
// allocations and slots, each with a serial number that no later allocation reuses (AFF-PREPARED-
// STALE: a new allocation at a freed one's address is another allocation; the bug it guards
// against reads the new allocation through a transfer prepared over the old one). A slot keeps its
// serial across release and remap: `released` says it has no backing now, `backing` counts its
// remaps, so that a prepared transfer follows it (AFF-PREPARED-FOLLOW).
#pragma once
#include <cstddef>
#include <cstdint>

namespace xmc::be {

// Driver: memory the backend never saw allocated, known by the driver's identity of its allocation
// (CUDA's buffer ID; transfer::Executor::buffer_identity), not by the book.
enum class MemKind : uint8_t { None = 0, Pinned, Registered, Device, Slot, Driver };

// What the book says of the allocation holding an address. serial 0: none it tracks (plain
// pageable memory, the caller's to keep alive).
struct MemoryStamp {
    uint64_t serial = 0;
    MemKind kind = MemKind::None;
    uintptr_t base = 0;
    size_t size = 0;
    bool released = false;  // a slot whose backing is released
    uint64_t backing = 0;   // a slot's remaps so far
};

const char *mem_kind_name(MemKind k);

// The book's operations; every tracked allocation is recorded by the one place that makes it:
// PinRegistry (pinned blocks, also a pooled block handed out again), Registrations, the streams'
// dev_alloc/dev_free, the slots.
void book_add(uintptr_t base, size_t size, MemKind kind);
void book_remove(uintptr_t base, MemKind kind);
void book_slot_released(uintptr_t base);
void book_slot_remapped(uintptr_t base);
// The innermost tracked allocation holding addr (serial 0 when none).
MemoryStamp book_find(const void *addr);

}  // namespace xmc::be
