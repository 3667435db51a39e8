// The process's book of tracked memory (memory_book.hpp): a map from base to entry under one lock.
#include "memory_book.hpp"

#include <map>
#include <mutex>

namespace xmc::be {
namespace {

struct Book {
    std::mutex mu;
    std::map<uintptr_t, MemoryStamp> by_base;  // at most one entry per base (a new one replaces)
    uint64_t next = 0;
};

Book &book() {
    static Book *b = new Book;  // never destroyed: backends record into it until the process ends
    return *b;
}

}  // namespace

const char *mem_kind_name(MemKind k) {
    switch (k) {
    case MemKind::Pinned: return "pinned block";
    case MemKind::Registered: return "registration";
    case MemKind::Device: return "device allocation";
    case MemKind::Slot: return "slot";
    case MemKind::Driver: return "device allocation (by the driver's buffer ID)";
    default: return "untracked memory";
    }
}

void book_add(uintptr_t base, size_t size, MemKind kind) {
    Book &b = book();
    std::lock_guard<std::mutex> lk(b.mu);
    MemoryStamp s;
    s.serial = ++b.next;
    s.kind = kind;
    s.base = base;
    s.size = size;
    b.by_base[base] = s;
}

void book_remove(uintptr_t base, MemKind kind) {
    Book &b = book();
    std::lock_guard<std::mutex> lk(b.mu);
    if (auto it = b.by_base.find(base); it != b.by_base.end() && it->second.kind == kind) b.by_base.erase(it);
}

void book_slot_released(uintptr_t base) {
    Book &b = book();
    std::lock_guard<std::mutex> lk(b.mu);
    if (auto it = b.by_base.find(base); it != b.by_base.end() && it->second.kind == MemKind::Slot)
        it->second.released = true;
}

void book_slot_remapped(uintptr_t base) {
    Book &b = book();
    std::lock_guard<std::mutex> lk(b.mu);
    if (auto it = b.by_base.find(base); it != b.by_base.end() && it->second.kind == MemKind::Slot) {
        it->second.released = false;
        ++it->second.backing;
    }
}

MemoryStamp book_find(const void *addr) {
    const auto a = reinterpret_cast<uintptr_t>(addr);
    Book &b = book();
    std::lock_guard<std::mutex> lk(b.mu);
    // Entries at or below addr, nearest first: the first that holds it is the innermost.
    for (auto it = b.by_base.upper_bound(a); it != b.by_base.begin();) {
        --it;
        if (a - it->first < it->second.size) return it->second;
    }
    return MemoryStamp{};
}

}  // namespace xmc::be
