#include "reg_model.hpp"

namespace xmc::model {

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
    if (device < 0 || device >= devices) return XMC_ERR_NO_DEVICE;
    size_t base = 0, size = 0;
    if (!recorded(off, n, &base, &size)) return XMC_ERR_INVALID_ARGUMENT;
    for (const auto &[b, r] : live)
        if (b < base + size && base < b + r.size) return XMC_ERR_ALREADY_REGISTERED;
    live[base] = Range{size, device};
    return XMC_OK;
}

xmc_status RegModel::unreg(size_t off) { return live.erase(off) ? XMC_OK : XMC_ERR_NOT_REGISTERED; }

long long RegModel::holder(size_t off) const {
    for (const auto &[b, r] : live)
        if (off >= b && off < b + r.size) return static_cast<long long>(b);
    return -1;
}

} // namespace xmc::model
