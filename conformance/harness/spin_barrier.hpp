// A barrier for tests that race threads on purpose (PIN-THREADS, REG-THREADS, the
// contested slot of VMM-STATE): its waiters spin, yielding, instead of sleeping, so
// the threads that are on a CPU when the last one arrives start their next step at
// the same moment (they yield now and then, so that every thread gets to arrive). A sleeping barrier (std::barrier) wakes its waiters one by one,
// microseconds apart: the first is usually done before the second runs, and the race
// the test is there to provoke is rarely met.
#pragma once
#include <atomic>
#include <thread>

namespace xmc::conformance {

class SpinBarrier {
public:
    explicit SpinBarrier(int n) : n_(n) {}
    void arrive_and_wait() {
        const unsigned gen = gen_.load();  // cannot move on before this thread arrives
        if (count_.fetch_add(1) + 1 == n_) {
            count_.store(0);
            gen_.fetch_add(1);
            return;
        }
        // Mostly a tight spin: a thread inside sched_yield when the last one arrives
        // would start a microsecond late, the width of the windows the tests look for.
        for (unsigned i = 1; gen_.load(std::memory_order_acquire) == gen; ++i)
            if (i % 4096 == 0) std::this_thread::yield();
    }

private:
    const int n_;
    std::atomic<int> count_{0};
    std::atomic<unsigned> gen_{0};
};

} // namespace xmc::conformance
