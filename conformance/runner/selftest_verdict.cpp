// The self-test's verdict on one qualification (xmc qualify --expect-fail): the suite must fail
// exactly the requirements the planted bug breaks, not merely everything.
#include "qualify.hpp"

#include <cstdio>
#include <set>
#include <sstream>

namespace xmc::conformance {

int selftest_verdict(const std::string &expect_fail, const std::string &may_fail,
                     const std::vector<std::string> &failed_ids) {
    std::set<std::string> want, may, got;
    std::stringstream ss(expect_fail), ms(may_fail);
    for (std::string id; std::getline(ss, id, ',');)
        if (id != "none") want.insert(id);  // "none": nothing need fail (but the --may-fail ones may)
    for (std::string id; std::getline(ms, id, ',');) may.insert(id);
    for (const auto &id : failed_ids) {
        if (may.count(id) && !want.count(id))
            std::printf("xmc selftest: tolerated: %s failed too (--may-fail: the bug reaches it when a race goes "
                        "its way or a sequence draws the case)\n",
                        id.c_str());
        else
            got.insert(id);
    }
    if (want == got) {
        if (want.empty()) std::printf("xmc selftest: nothing failed but what may fail (%s)\n", may_fail.c_str());
        else std::printf("xmc selftest: caught: the suite failed exactly %s\n", expect_fail.c_str());
        return 0;
    }
    for (const auto &id : want)
        if (!got.count(id)) std::printf("xmc selftest: NOT CAUGHT: %s passed on a backend that breaks it\n", id.c_str());
    for (const auto &id : got)
        if (!want.count(id)) std::printf("xmc selftest: UNEXPECTED: %s failed, but the planted bug is not there\n", id.c_str());
    return 1;
}

} // namespace xmc::conformance
