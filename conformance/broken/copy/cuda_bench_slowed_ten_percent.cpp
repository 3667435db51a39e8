// xmc-selftest: fails none
// xmc-selftest: bench-only every xmc_gpu_bench row about 10% slower; `xmc bench` must fail it 5 runs of 5
// xmc-selftest: base cuda
// xmc-selftest: filter COPY-STRIDED
// xmc-selftest: timeout 30
// Bug (bench only, on CUDA): the backend is correct but slow. Each entry a
// benchmark row waits in (a stream synchronize, a request wait: the copies,
// callbacks, graphs and slot reloads they finish; the registration and slot
// calls themselves) takes a tenth longer than the reference: it times the
// reference's call and then waits a tenth of that again, so a copy's wait
// grows with the copy's duration and every row of xmc_gpu_bench drops to about
// 0.91 of its raw peak. No requirement's check can see a tenth of a duration
// (the self-test qualifies one copy requirement and must pass it); `xmc bench`
// must fail it (hardware/run_bench_honesty.sh runs it 5 times on a GPU: the
// pinned and registered rows' pairs fall below their 0.97 targets).
#include "cuda_broken.hpp"

#include <chrono>
#include <thread>

namespace xmc::broken_cuda {
namespace {

using Clock = std::chrono::steady_clock;

// Waits `d` more: spinning below 200 us, where a sleep would overshoot a
// granule cycle's few-microsecond calls many times over.
void wait_more(Clock::duration d) {
    const auto until = Clock::now() + d;
    if (d > std::chrono::microseconds(200)) std::this_thread::sleep_for(d - std::chrono::microseconds(100));
    while (Clock::now() < until) {
    }
}

// The reference's entry M, a tenth slower.
template <auto M> struct Slowed;
template <typename... A, xmc_status (*xmc_backend::*M)(A...)> struct Slowed<M> {
    static xmc_status call(A... a) {
        const auto t0 = Clock::now();
        const xmc_status st = (reference()->*M)(a...);
        wait_more((Clock::now() - t0) / 10);  // the bug
        return st;
    }
};

} // namespace

void plant(xmc_backend &t) {
    t.stream_synchronize = Slowed<&xmc_backend::stream_synchronize>::call;
    t.request_wait = Slowed<&xmc_backend::request_wait>::call;
    t.copy = Slowed<&xmc_backend::copy>::call;
    t.reg_register = Slowed<&xmc_backend::reg_register>::call;
    t.reg_unregister = Slowed<&xmc_backend::reg_unregister>::call;
    t.slot_create = Slowed<&xmc_backend::slot_create>::call;
    t.slot_release = Slowed<&xmc_backend::slot_release>::call;
    t.slot_remap = Slowed<&xmc_backend::slot_remap>::call;
    t.slot_close = Slowed<&xmc_backend::slot_close>::call;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("cuda_bench_slowed_ten_percent")
