#include "os_facts.hpp"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace xmc::conformance {

LockState lock_state(const void *addr, size_t len) {
    LockState st;
    st.all_locked = true;
    const auto lo = reinterpret_cast<uintptr_t>(addr), hi = lo + len;
    std::ifstream in("/proc/self/smaps");
    std::string line;
    bool overlapping = false;
    while (std::getline(in, line)) {
        unsigned long start = 0, end = 0;
        // A mapping header: "start-end perms ..."; its fields follow.
        if (std::sscanf(line.c_str(), "%lx-%lx ", &start, &end) == 2) {
            overlapping = start < hi && lo < end;
            if (overlapping) st.any_mapped = true;
            continue;
        }
        if (overlapping && line.rfind("VmFlags:", 0) == 0) {
            std::istringstream flags(line.substr(8));
            bool locked = false;
            for (std::string f; flags >> f;) locked |= f == "lo";
            st.all_locked &= locked;
            st.any_locked |= locked;
        }
    }
    if (!st.any_mapped) st.all_locked = false;
    return st;
}

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

size_t heap_bytes_in_use() {
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

} // namespace xmc::conformance

namespace xmc::conformance {

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define XMC_MLOCK_IGNORED_BY "AddressSanitizer"
#elif __has_feature(thread_sanitizer)
#define XMC_MLOCK_IGNORED_BY "ThreadSanitizer"
#endif
#endif
#if !defined(XMC_MLOCK_IGNORED_BY) && defined(__SANITIZE_ADDRESS__)
#define XMC_MLOCK_IGNORED_BY "AddressSanitizer"
#endif
#if !defined(XMC_MLOCK_IGNORED_BY) && defined(__SANITIZE_THREAD__)
#define XMC_MLOCK_IGNORED_BY "ThreadSanitizer"
#endif

const char *mlock_ignored_reason() {
#ifdef XMC_MLOCK_IGNORED_BY
    return "built with " XMC_MLOCK_IGNORED_BY ", whose runtime makes mlock/munlock no-ops: page locking "
           "and RLIMIT_MEMLOCK cannot be observed (run this test in a build without sanitizers)";
#else
    return nullptr;
#endif
}

} // namespace xmc::conformance
