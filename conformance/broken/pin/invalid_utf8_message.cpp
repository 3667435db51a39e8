// xmc-selftest: fails PIN-FREE
// xmc-selftest: timeout 10
// Bug: a free of an interior address is refused with the wrong status, and the
// error detail holds bytes that are not UTF-8 (0xff 0xfe, as a driver's message
// in another encoding would). PIN-FREE's test fails and quotes that detail; the
// child's event line must still parse (runner.invalid_utf8_message), or the
// parent reports the test crashed and its message is lost.
#include "broken.hpp"

namespace xmc::broken {
static xmc_status pin_free(xmc_instance *inst, void *p) {
    xmc_pin_info q{};
    if (host()->pin_query(inst, p, 1, &q) == XMC_OK && q.pinned && q.base != p)
        return xmc::be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_free", "pin_free: %p is inside a block \xff\xfe", p);
    return host()->pin_free(inst, p);
}
void plant(xmc_backend &t) { t.pin_free = pin_free; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_invalid_utf8_message")
