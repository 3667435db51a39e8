// The hostile-input fixture (hostile.hpp).
#include "hostile.hpp"

#include <sys/mman.h>

#include <cstring>
#include <string>

namespace xmc::conformance {

void HostileTest::TearDown() {
    for (auto &[p, n] : maps_) munmap(p, n);
    maps_.clear();
    BackendTest::TearDown();
}

char *HostileTest::pages(size_t n) {
    void *p = mmap(nullptr, n * page_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    if (p == MAP_FAILED) return nullptr;
    maps_.emplace_back(p, n * page_size());
    std::memset(p, 0x5A, n * page_size());
    return static_cast<char *>(p);
}

xmc_instance *HostileTest::closed_instance() {
    xmc_instance *other = nullptr;
    xmc_open_params params{sizeof(xmc_open_params), nullptr};
    EXPECT_EQ(api->open(&params, &other), XMC_OK);
    EXPECT_EQ(api->close(other), XMC_OK);
    return other;
}

bool HostileTest::in_tree() const {
    const std::string n = api->name;
    return n == "host" || n == "cuda" || n == "level_zero" || n.rfind("broken_", 0) == 0;
}

void HostileTest::expect_dead_instances_refused(const char *what,
                                                const std::function<xmc_status(xmc_instance *)> &call) {
    if (!in_tree()) return;
    xmc_instance *closed = closed_instance();
    EXPECT_EQ(call(nullptr), XMC_ERR_INVALID_HANDLE) << what << " with a NULL instance";
    EXPECT_EQ(call(closed), XMC_ERR_INVALID_HANDLE) << what << " with a closed instance";
}

} // namespace xmc::conformance
