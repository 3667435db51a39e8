#include "reg_model.hpp"

namespace xmc::model {

// REG-ALIGN: refuse records the range as asked; round widens it to pages.
bool RegModel::recorded(size_t off, size_t n, size_t *base, size_t *size) const {
    if (policy == XMC_REG_ALIGN_REFUSE) {
        if (off % page || n % page) return false;
        *base = off;
        *size = n;
        return true;
    }
    *base = off / page * page;
    *size = (off + n + page - 1) / page * page - *base;
    return true;
}

xmc_status RegModel::reg(size_t off, size_t n, int32_t device) {
    if (n == 0) return XMC_ERR_INVALID_ARGUMENT;
    // REG-DEVICE: every device in [0, devices) registers, not only the first.
    if (device < 0 || device >= devices) return XMC_ERR_NO_DEVICE;
    size_t base = 0, size = 0;
    // REG-ALIGN: under refuse an unaligned range is an invalid argument.
    // REG-ARGS: never out of memory or too large for what is only unaligned.
    if (!recorded(off, n, &base, &size)) return XMC_ERR_INVALID_ARGUMENT;
    // REG-LARGE: under refuse, above the limit is too large, nothing recorded.
    if (large == XMC_REG_LARGE_REFUSE && size > limit) return XMC_ERR_TOO_LARGE;
    // REG-DOUBLE: overlapping a recorded range is refused, nothing recorded.
    for (const auto &[b, r] : live)
        if (b < base + size && base < b + r.size) return XMC_ERR_ALREADY_REGISTERED;
    live[base] = Range{size, device};
    return XMC_OK;
}

// REG-UNREG-BASE: exactly a recorded base (the rounded one under round);
// anything else is not registered and changes nothing.
xmc_status RegModel::unreg(size_t off) { return live.erase(off) ? XMC_OK : XMC_ERR_NOT_REGISTERED; }

long long RegModel::holder(size_t off) const {
    for (const auto &[b, r] : live)
        if (off >= b && off < b + r.size) return static_cast<long long>(b);
    return -1;
}

bool RegModel::reuse(size_t off, size_t n) const {
    for (const auto &[b, r] : live)
        if (b < off + n && off < b + r.size) return false;
    return true;
}

size_t RegModel::driver_calls(size_t size) const {
    if (large == XMC_REG_LARGE_SPLIT && limit > 0) return (size + limit - 1) / limit;
    return 1;
}

} // namespace xmc::model
