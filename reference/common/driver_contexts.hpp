// The per-device contexts a platform's Driver retains for every instance (CUDA's primary
// contexts, Level Zero's contexts), released when the last instance and the last registration
// are gone (close, REG-CLOSE).
#pragma once
#include <mutex>

namespace xmc::be {

// Under d.mu, when no instance and no registration is left: `release(dev)` for each device whose
// context is held (`dev.ctx`), `ok` its success. A context the driver keeps stays held and the
// next idle moment tries again; the other devices' are still released. The first failure.
template <class Driver, class Result, class Release> Result release_if_idle(Driver &d, Result ok, Release release) {
    std::lock_guard<std::mutex> lock(d.mu);
    if (d.instances > 0 || d.registrations > 0) return ok;
    Result first = ok;
    for (auto &dev : d.devices) {
        if (!dev.ctx) continue;
        const Result r = release(dev);
        if (r == ok) dev.ctx = nullptr;
        else if (first == ok) first = r;
    }
    return first;
}

} // namespace xmc::be
