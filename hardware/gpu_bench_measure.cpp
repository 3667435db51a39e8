// xmc_gpu_bench's measuring helpers (gpu_bench.hpp): sizes for people, the clock, medians of
// timed runs and of raw/backend pairs, and where a slot request's time goes.
#include "gpu_bench.hpp"

namespace xmc_gpu_bench {

std::string human(size_t n) {
    const char *u[] = {"B", "KiB", "MiB", "GiB"};
    int i = 0;
    while (n >= 1024 && n % 1024 == 0 && i < 3) { n /= 1024; ++i; }
    return std::to_string(n) + " " + u[i];
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median seconds of `reps` runs of fn (after one warm-up run).
double median_time(int reps, const std::function<void()> &fn) {
    fn();
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        double t0 = now_s();
        fn();
        t.push_back(now_s() - t0);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}
PairedMedians pairs_of(const std::vector<double> &tr, const std::vector<double> &tx) {
    PairedMedians p{median_of(tr), median_of(tx), {}};
    for (size_t i = 0; i < tr.size() && i < tx.size(); ++i)
        if (tr[i] > 0 && tx[i] > 0) p.ratios.push_back(tr[i] / tx[i]);
    return p;
}
PairedMedians paired_measured(int reps, const std::function<double()> &raw, const std::function<double()> &x) {
    raw();
    x();
    std::vector<double> tr, tx;
    for (int i = 0; i < reps; ++i) {
        if (i % 2) {
            tx.push_back(x());
            tr.push_back(raw());
        } else {
            tr.push_back(raw());
            tx.push_back(x());
        }
    }
    return pairs_of(tr, tx);
}
PairedMedians paired_time(int reps, const std::function<void()> &raw, const std::function<void()> &x) {
    auto timed = [](const std::function<void()> &fn) {
        return [&fn] {
            const double t0 = now_s();
            fn();
            return now_s() - t0;
        };
    };
    return paired_measured(reps, timed(raw), timed(x));
}

std::pair<PairedMedians, PairedMedians> paired_time2(int reps, const std::function<void()> &raw_a,
                                                     const std::function<void()> &raw_b, const std::function<void()> &x) {
    auto timed = [](const std::function<void()> &fn) {
        const double t0 = now_s();
        fn();
        return now_s() - t0;
    };
    raw_a();
    raw_b();
    x();
    std::vector<double> ta, tb, tx;
    const std::function<void()> *order[3] = {&raw_a, &raw_b, &x};
    std::vector<double> *into[3] = {&ta, &tb, &tx};
    for (int i = 0; i < reps; ++i)
        for (int k = 0; k < 3; ++k) {
            const int w = (i + k) % 3;
            into[w]->push_back(timed(*order[w]));
        }
    return {pairs_of(ta, tx), pairs_of(tb, tx)};
}

void print_slot_phases(const xmc_backend *api, size_t n, void *src) {
    char path[] = "/tmp/xmc-slot-phases-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return;
    ::close(fd);
    setenv("XMC_CUDA_SLOT_PHASES", path, 1);
    xmc_instance *in = nullptr;
    xmc_open_params op{sizeof op, nullptr};
    const bool opened = api->open(&op, &in) == XMC_OK;
    unsetenv("XMC_CUDA_SLOT_PHASES");
    std::vector<double> wall;
    if (opened) {
        xmc_stream *st = nullptr;
        xmc_slot *sl = nullptr;
        xmc_slot_info si{};
        if (api->stream_create(in, 0, &st) == XMC_OK && api->slot_create(in, 0, n, &sl, &si) == XMC_OK) {
            for (int i = 0; i < 31; ++i) {
                xmc_request *r1 = nullptr, *r2 = nullptr;
                api->slot_release(in, sl, st, &r1);
                api->request_wait(in, r1, 60000);
                const double t0 = now_s();
                api->slot_remap(in, sl, st, src, si.size, 0, &r2);
                api->request_wait(in, r2, 60000);
                if (i > 0) wall.push_back((now_s() - t0) * 1e6);
                api->request_adopt(in, r2);
                api->request_destroy(in, r1);
                api->request_destroy(in, r2);
            }
            api->slot_close(in, sl);
        }
        if (st) api->stream_destroy(in, st);
        api->close(in);
    }
    std::ifstream f(path);
    std::vector<std::vector<double>> rel(5), rem(5);
    for (std::string kind; f >> kind;) {
        size_t slots = 0, nbytes = 0;
        double t[5];
        f >> slots >> nbytes >> t[0] >> t[1] >> t[2] >> t[3] >> t[4];
        for (int k = 0; k < 5; ++k)
            if (t[k] >= 0) (kind == "remap" ? rem : rel)[size_t(k)].push_back(t[k]);
    }
    std::remove(path);
    auto med = [](std::vector<double> x) {
        if (x.empty()) return -1.0;
        std::sort(x.begin(), x.end());
        return x[x.size() / 2];
    };
    if (rem[0].empty()) {
        std::printf("xmc_gpu_bench: no slot phases recorded (the backend does not write XMC_CUDA_SLOT_PHASES)\n");
        return;
    }
    std::printf("xmc_gpu_bench: slot phases at %s (us after submit, medians): remap: stream point seen %.1f, worker "
                "picked it up %.1f, driver calls done %.1f, copy enqueued %.1f, copy seen done %.1f; remap call to "
                "its wait's return %.1f; release: point %.1f, picked %.1f, unmapped %.1f\n",
                human(n).c_str(), med(rem[0]), med(rem[1]), med(rem[2]), med(rem[3]), med(rem[4]), med(wall),
                med(rel[0]), med(rel[1]), med(rel[2]));
}

} // namespace xmc_gpu_bench
