// xmc_gpu_transfer_bench: the CUDA backend's affine transfer executor (AFF-SPEED) next to the raw
// driver copy of the same bytes measured in the same run, as a ratio (SPEC 10). Needs two GPUs;
// with fewer it says so and exits 77 (a skip with its reason).
//
//   xmc_gpu_transfer_bench [--backend cuda] [--bytes N] [--reps N] [--json FILE] [--check-targets]
//
// Rows (ranks are threads of this process over the threads transport, one GPU each):
//   two-rank dense:   rank 0 (GPU0) holds an N-byte source, rank 1 (GPU1) the target; one segment
//                     vs raw cuMemcpyPeerAsync of N bytes (GPU1 pulls)                 target >= 0.9
//   two-rank reshard: [R, C] float32, column split -> row split over both ranks; each rank keeps a
//                     quarter (local, strided) and pulls a quarter (peer, strided)
//                     vs raw cuMemcpyDtoDAsync + cuMemcpyPeerAsync of N/4 bytes on each GPU
//                                                                                      target >= 0.9
//   local dense:      one rank, one N-byte segment vs raw cuMemcpyDtoDAsync            target >= 0.9
//   local 8 KiB rows: one rank, [R, 2048] x 8 B -> its first 1024 columns (8 KiB rows at a 16 KiB
//                     pitch), N/2 bytes vs raw 1-D cuMemcpyDtoDAsync of N/2 bytes       target >= 0.7
//                     (and, for information, vs raw cuMemcpy2DAsync of the same rows)
// Figures are medians of --reps runs after a warm-up; each xmc figure is the wall time of the
// whole call (agreement, copies, completion) from the last rank's entry to the last rank's return
// (the rank threads are started by this harness before that). --check-targets exits 1 when a ratio
// is below its target. The data of the dense cases is checked after the runs.
#include "loader.hpp"
#include "transport_threads.hpp"

#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Driver {
    void *lib = nullptr;
#define XMC_CU(name, ...) CUresult (*name)(__VA_ARGS__) = nullptr;
    XMC_CU(cuInit, unsigned)
    XMC_CU(cuDeviceGetCount, int *)
    XMC_CU(cuDeviceGet, CUdevice *, int)
    XMC_CU(cuDeviceGetName, char *, int, CUdevice)
    XMC_CU(cuDriverGetVersion, int *)
    XMC_CU(cuDevicePrimaryCtxRetain, CUcontext *, CUdevice)
    XMC_CU(cuDevicePrimaryCtxRelease_v2, CUdevice)
    XMC_CU(cuCtxSetCurrent, CUcontext)
    XMC_CU(cuStreamCreate, CUstream *, unsigned)
    XMC_CU(cuStreamDestroy_v2, CUstream)
    XMC_CU(cuStreamSynchronize, CUstream)
    XMC_CU(cuMemcpyDtoDAsync_v2, CUdeviceptr, CUdeviceptr, size_t, CUstream)
    XMC_CU(cuMemcpy2DAsync_v2, const CUDA_MEMCPY2D *, CUstream)
    XMC_CU(cuMemcpyPeerAsync, CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream)
    XMC_CU(cuMemcpy3DAsync_v2, const CUDA_MEMCPY3D *, CUstream)
    XMC_CU(cuMemcpy3DPeerAsync, const CUDA_MEMCPY3D_PEER *, CUstream)
    XMC_CU(cuCtxEnablePeerAccess, CUcontext, unsigned)
    XMC_CU(cuMemsetD8_v2, CUdeviceptr, unsigned char, size_t)
    XMC_CU(cuMemcpyDtoH_v2, void *, CUdeviceptr, size_t)
#undef XMC_CU
    bool load(const char *path) {
        lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!lib) return false;
        bool ok = true;
#define XMC_SYM(name) ok &= (*reinterpret_cast<void **>(&name) = dlsym(lib, #name)) != nullptr;
        XMC_SYM(cuInit) XMC_SYM(cuDeviceGetCount) XMC_SYM(cuDeviceGet) XMC_SYM(cuDeviceGetName)
        XMC_SYM(cuDriverGetVersion) XMC_SYM(cuDevicePrimaryCtxRetain) XMC_SYM(cuDevicePrimaryCtxRelease_v2)
        XMC_SYM(cuCtxSetCurrent) XMC_SYM(cuStreamCreate) XMC_SYM(cuStreamDestroy_v2) XMC_SYM(cuStreamSynchronize)
        XMC_SYM(cuMemcpyDtoDAsync_v2) XMC_SYM(cuMemcpy2DAsync_v2) XMC_SYM(cuMemcpyPeerAsync)
        XMC_SYM(cuCtxEnablePeerAccess) XMC_SYM(cuMemsetD8_v2) XMC_SYM(cuMemcpyDtoH_v2)
        XMC_SYM(cuMemcpy3DAsync_v2) XMC_SYM(cuMemcpy3DPeerAsync)
#undef XMC_SYM
        return ok;
    }
};

#define CK(call)                                                                                            \
    do {                                                                                                    \
        CUresult r_ = (call);                                                                               \
        if (r_ != CUDA_SUCCESS) {                                                                           \
            std::fprintf(stderr, "xmc_gpu_transfer_bench: %s failed: %d (line %d)\n", #call, r_, __LINE__); \
            std::exit(1);                                                                                   \
        }                                                                                                   \
    } while (0)

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Median seconds of `reps` runs of fn, after one warm-up run.
double median_time(int reps, const std::function<void()> &fn) {
    fn();
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        const double t0 = now_s();
        fn();
        t.push_back(now_s() - t0);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

struct Row {
    std::string path;
    double figure = 0, peak = 0;  // GB/s
    double target = 0;            // 0: for information
    double ratio() const { return figure > 0 && peak > 0 ? figure / peak : 0; }
};

xmc_segment segment(int32_t src, int32_t tgt, std::vector<int64_t> ext, int64_t src_off, std::vector<int64_t> src_str,
                    int64_t tgt_off, std::vector<int64_t> tgt_str) {
    xmc_segment s{};
    s.src_rank = src, s.tgt_rank = tgt, s.ndim = int32_t(ext.size());
    s.src_offset = src_off, s.tgt_offset = tgt_off;
    for (size_t d = 0; d < ext.size(); ++d)
        s.extents[d] = ext[d], s.src_strides[d] = src_str[d], s.tgt_strides[d] = tgt_str[d];
    return s;
}

// A dense row-major shard buffer of `shape` in device memory.
xmc_shard_buffer dense(void *ptr, int32_t device, std::vector<int64_t> shape) {
    xmc_shard_buffer b{};
    b.ptr = ptr, b.kind = XMC_MEM_DEVICE, b.device = device, b.ndim = int32_t(shape.size());
    int64_t stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
        b.shape[d] = shape[d];
        b.strides[d] = stride;
        stride *= shape[d];
    }
    b.capacity = uint64_t(stride);
    return b;
}

} // namespace

int main(int argc, char **argv) {
    std::string backend_name = "cuda", json_path;
    size_t bytes = size_t{1} << 30;
    int reps = 10;
    bool check_targets = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
        if (a == "--backend") backend_name = next();
        else if (a == "--bytes") bytes = std::stoull(next());
        else if (a == "--reps") reps = std::max(1, std::stoi(next()));
        else if (a == "--json") json_path = next();
        else if (a == "--check-targets") check_targets = true;
        else {
            std::fprintf(stderr, "usage: xmc_gpu_transfer_bench [--backend B] [--bytes N] [--reps N] [--json F] "
                                 "[--check-targets]\n");
            return 2;
        }
    }
    // Shapes need whole 256 KiB blocks (the reshard's rows are 64 KiB, the strided rows 16 KiB).
    bytes = std::max<size_t>(bytes / (256 << 10), 4) * (256 << 10);
    const char *drv_path = std::getenv("XMC_CUDA_DRIVER") ? std::getenv("XMC_CUDA_DRIVER") : "libcuda.so.1";
    Driver d;
    int ndev = 0;
    if (!d.load(drv_path) || d.cuInit(0) != CUDA_SUCCESS || d.cuDeviceGetCount(&ndev) != CUDA_SUCCESS || ndev == 0) {
        std::printf("xmc_gpu_transfer_bench: skipped: no GPU (no CUDA driver %s, or no device)\n", drv_path);
        return 77;
    }
    if (ndev < 2) {
        std::printf("xmc_gpu_transfer_bench: skipped: needs 2 GPUs, the driver reports %d\n", ndev);
        return 77;
    }
    int drv_version = 0;
    d.cuDriverGetVersion(&drv_version);
    CUdevice dev[2];
    CUcontext ctx[2];
    CUstream s[2];
    char name[256] = {};
    for (int g = 0; g < 2; ++g) {
        CK(d.cuDeviceGet(&dev[g], g));
        CK(d.cuDevicePrimaryCtxRetain(&ctx[g], dev[g]));
    }
    d.cuDeviceGetName(name, sizeof name, dev[0]);
    for (int g = 0; g < 2; ++g) {
        CK(d.cuCtxSetCurrent(ctx[g]));
        CK(d.cuStreamCreate(&s[g], CU_STREAM_NON_BLOCKING));
        const CUresult r = d.cuCtxEnablePeerAccess(ctx[1 - g], 0);
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
            std::printf("xmc_gpu_transfer_bench: note: peer access GPU%d -> GPU%d not enabled (%d)\n", g, 1 - g, r);
    }
    std::printf("xmc_gpu_transfer_bench: %d x %s, driver %d, %zu MiB per transfer, %d reps\n", ndev, name,
                drv_version, bytes >> 20, reps);

    std::string err;
    const auto *lb = xmc::conformance::load_backend(backend_name, &err);
    if (!lb) {
        std::fprintf(stderr, "xmc_gpu_transfer_bench: %s\n", err.c_str());
        return 1;
    }
    const xmc_backend *api = lb->api;
    if (!(api->capabilities & XMC_CAP_TRANSFER) || !api->transfer_execute) {
        std::fprintf(stderr, "xmc_gpu_transfer_bench: backend '%s' does not declare transfer\n", api->name);
        return 1;
    }
    xmc_instance *inst = nullptr;
    xmc_open_params op{sizeof op, nullptr};
    if (api->open(&op, &inst) != XMC_OK) {
        std::fprintf(stderr, "xmc_gpu_transfer_bench: open failed\n");
        return 1;
    }
    auto must = [&](xmc_status st, const char *what) {
        if (st == XMC_OK) return;
        xmc_error_info e{};
        api->last_error(inst, &e);
        std::fprintf(stderr, "xmc_gpu_transfer_bench: %s failed: %s: %s\n", what, xmc_status_string(st), e.message);
        std::exit(1);
    };
    // Device buffers through the backend (so that it knows them), used raw for the peaks too.
    void *a0 = nullptr, *b0 = nullptr, *a1 = nullptr, *b1 = nullptr;
    must(api->dev_alloc(inst, 0, bytes, &a0), "dev_alloc");
    must(api->dev_alloc(inst, 0, bytes, &b0), "dev_alloc");
    must(api->dev_alloc(inst, 1, bytes, &a1), "dev_alloc");
    must(api->dev_alloc(inst, 1, bytes, &b1), "dev_alloc");
    const auto P = [](void *p) { return reinterpret_cast<CUdeviceptr>(p); };
    xmc_stream *xs[2] = {};
    must(api->stream_create(inst, 0, &xs[0]), "stream_create");
    must(api->stream_create(inst, 1, &xs[1]), "stream_create");
    auto sync_both = [&] {
        CK(d.cuStreamSynchronize(s[0]));
        CK(d.cuStreamSynchronize(s[1]));
    };
    auto raw_bw = [&](double count, const std::function<void()> &enqueue) {
        return count / 1e9 / median_time(reps, [&] { enqueue(); sync_both(); });
    };

    // One transfer on `ranks` threads (1 or 2) over the threads transport; every rank's buffers.
    struct Rank {
        xmc_shard_buffer src{}, tgt{};
    };
    // Returns the seconds from the moment the last rank called transfer_execute to the moment the
    // last one returned: the rank threads' start is the harness's, not the executor's.
    auto xmc_run = [&](const std::vector<xmc_segment> &segs, const std::vector<Rank> &ranks, size_t elem) {
        const int n = int(ranks.size());
        double t_in[2] = {0, 0}, t_out[2] = {0, 0};
        xmc::conformance::ThreadsMailbox box(n, 60000);
        std::vector<int32_t> labels(static_cast<size_t>(n), 0);
        for (int r = 0; r < n; ++r) labels[size_t(r)] = r;
        auto one = [&](int r) {
            xmc_group g{r, n, labels.data(), box.endpoint(r), 60000};
            xmc_transfer_args a{};
            a.struct_size = sizeof a;
            a.plan = xmc_plan_view{segs.data(), segs.size(), 0x5eed};
            a.source = ranks[size_t(r)].src;
            a.target = ranks[size_t(r)].tgt;
            a.elem_size = elem;
            a.staging_budget = uint64_t(1) << 30;
            a.group = &g;
            a.stream = xs[r];
            xmc_transfer_stats st{};
            t_in[r] = now_s();
            must(api->transfer_execute(inst, &a, &st), "transfer_execute");
            t_out[r] = now_s();
        };
        if (n == 1) {
            one(0);
            return t_out[0] - t_in[0];
        }
        std::thread t1(one, 1);
        one(0);
        t1.join();
        return std::max(t_out[0], t_out[1]) - std::max(t_in[0], t_in[1]);
    };
    auto xmc_bw = [&](double count, const std::vector<xmc_segment> &segs, const std::vector<Rank> &ranks, size_t elem) {
        xmc_run(segs, ranks, elem);  // warm-up
        std::vector<double> t;
        for (int i = 0; i < reps; ++i) t.push_back(xmc_run(segs, ranks, elem));
        std::sort(t.begin(), t.end());
        return count / 1e9 / t[t.size() / 2];
    };

    std::vector<Row> rows;
    bool data_ok = true;
    auto check = [&](void *p, size_t at, unsigned char want) {
        unsigned char got = 0;
        CK(d.cuMemcpyDtoH_v2(&got, P(p) + at, 1));
        data_ok &= got == want;
    };

    // AFF-SPEED: between the GPUs of one process, at peer copy speed.
    // (a) two ranks, dense: rank 0's source on GPU0, rank 1's target on GPU1.
    {
        CK(d.cuCtxSetCurrent(ctx[0]));
        CK(d.cuMemsetD8_v2(P(a0), 0x5a, bytes));
        CK(d.cuCtxSetCurrent(ctx[1]));
        CK(d.cuMemsetD8_v2(P(a1), 0, bytes));
        const int64_t n = int64_t(bytes);
        const std::vector<xmc_segment> segs = {segment(0, 1, {n}, 0, {1}, 0, {1})};
        std::vector<Rank> ranks(2);
        ranks[0].src = dense(a0, 0, {n});
        ranks[1].tgt = dense(a1, 1, {n});
        CK(d.cuCtxSetCurrent(ctx[1]));  // GPU1 pulls, as rank 1 does
        const double raw = raw_bw(double(bytes), [&] { CK(d.cuMemcpyPeerAsync(P(a1), ctx[1], P(a0), ctx[0], bytes, s[1])); });
        CK(d.cuCtxSetCurrent(ctx[1]));
        CK(d.cuMemsetD8_v2(P(a1), 0, bytes));
        const double fig = xmc_bw(double(bytes), segs, ranks, 1);
        check(a1, 0, 0x5a), check(a1, bytes / 2, 0x5a), check(a1, bytes - 1, 0x5a);
        rows.push_back(Row{"two-rank dense GPU0 -> GPU1 vs peer copy", fig, raw, 0.9});
    }
    // (a) two ranks, column split -> row split, float32 [R, C]: 64 KiB source rows.
    {
        const int64_t C = 32768, R = int64_t(bytes) / (4 * C);  // R >= 2: bytes >= 256 KiB
        const int64_t h = R / 2, w = C / 2;
        std::vector<xmc_segment> segs;
        for (int32_t sr = 0; sr < 2; ++sr)
            for (int32_t tr = 0; tr < 2; ++tr)
                segs.push_back(segment(sr, tr, {h, w}, tr * h * w, {w, 1}, sr * w, {C, 1}));
        std::vector<Rank> ranks(2);
        ranks[0].src = dense(a0, 0, {R, w}), ranks[0].tgt = dense(b0, 0, {h, C});
        ranks[1].src = dense(a1, 1, {R, w}), ranks[1].tgt = dense(b1, 1, {h, C});
        const size_t q = size_t(h * w * 4);  // each rank: a quarter kept, a quarter pulled
        const double raw = raw_bw(4.0 * double(q), [&] {
            CK(d.cuCtxSetCurrent(ctx[0]));
            CK(d.cuMemcpyDtoDAsync_v2(P(b0), P(a0), q, s[0]));
            CK(d.cuMemcpyPeerAsync(P(b0) + q, ctx[0], P(a1), ctx[1], q, s[0]));
            CK(d.cuCtxSetCurrent(ctx[1]));
            CK(d.cuMemcpyDtoDAsync_v2(P(b1), P(a1) + q, q, s[1]));
            CK(d.cuMemcpyPeerAsync(P(b1) + q, ctx[1], P(a0) + q, ctx[0], q, s[1]));
        });
        // Each target row: its first half from rank 0 (0x11), its second from rank 1 (0x22).
        CK(d.cuCtxSetCurrent(ctx[0]));
        CK(d.cuMemsetD8_v2(P(a0), 0x11, size_t(R * w * 4)));
        CK(d.cuCtxSetCurrent(ctx[1]));
        CK(d.cuMemsetD8_v2(P(a1), 0x22, size_t(R * w * 4)));
        const double fig = xmc_bw(4.0 * double(q), segs, ranks, 4);
        const size_t row = size_t(C * 4), half = size_t(w * 4), last = size_t(h - 1) * row;
        for (void *b : {b0, b1}) {
            check(b, 0, 0x11), check(b, half - 1, 0x11), check(b, half, 0x22), check(b, row - 1, 0x22);
            check(b, last + half - 1, 0x11), check(b, last + half, 0x22), check(b, last + row - 1, 0x22);
        }
        rows.push_back(Row{"two-rank col split -> row split vs DtoD+peer", fig, raw, 0.9});
        // For information: the raw driver copying the same strided boxes (each target row's two
        // halves), as 2-D copies of 64 KiB rows and as 3-D copies of 8 KiB sub-rows: what the
        // copy engines make of this shape.
        auto boxes = [&](size_t width, size_t height, size_t depth) {
            for (int g = 0; g < 2; ++g) {
                CK(d.cuCtxSetCurrent(ctx[g]));
                void *tgt = g ? b1 : b0, *own = g ? a1 : a0, *other = g ? a0 : a1;
                for (int half = 0; half < 2; ++half) {
                    void *srcp = half == g ? own : other;  // rank `half` holds columns [half*w, (half+1)*w)
                    CUDA_MEMCPY3D_PEER c;
                    std::memset(&c, 0, sizeof c);
                    c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
                    c.srcDevice = P(srcp) + size_t(g) * size_t(h * w * 4), c.srcContext = ctx[half];
                    c.srcPitch = width, c.srcHeight = depth > 1 ? size_t(w * 4) / width : height;
                    c.dstDevice = P(tgt) + size_t(half) * size_t(w * 4), c.dstContext = ctx[g];
                    c.dstPitch = depth > 1 ? width : size_t(C * 4), c.dstHeight = depth > 1 ? size_t(C * 4) / width : height;
                    c.WidthInBytes = width, c.Height = height, c.Depth = depth;
                    CK(d.cuMemcpy3DPeerAsync(&c, s[g]));
                }
            }
        };
        const double raw_2d = raw_bw(4.0 * double(q), [&] { boxes(size_t(w * 4), size_t(h), 1); });
        const double raw_sub = raw_bw(4.0 * double(q), [&] { boxes(8192, size_t(w * 4) / 8192, size_t(h)); });
        rows.push_back(Row{"  same reshard vs raw 2-D copies of its boxes", fig, raw_2d, 0});
        rows.push_back(Row{"  same reshard vs raw 3-D (8 KiB sub-rows) copies", fig, raw_sub, 0});
    }
    // AFF-SPEED: dense local segments at device copy speed.
    // (b) local dense on GPU0 (read + write counted).
    {
        CK(d.cuCtxSetCurrent(ctx[0]));
        CK(d.cuMemsetD8_v2(P(a0), 0x3c, bytes));
        const int64_t n = int64_t(bytes);
        const std::vector<xmc_segment> segs = {segment(0, 0, {n}, 0, {1}, 0, {1})};
        std::vector<Rank> ranks(1);
        ranks[0].src = dense(a0, 0, {n}), ranks[0].tgt = dense(b0, 0, {n});
        const double raw = raw_bw(2.0 * double(bytes), [&] { CK(d.cuMemcpyDtoDAsync_v2(P(b0), P(a0), bytes, s[0])); });
        CK(d.cuMemsetD8_v2(P(b0), 0, bytes));
        const double fig = xmc_bw(2.0 * double(bytes), segs, ranks, 1);
        check(b0, 0, 0x3c), check(b0, bytes - 1, 0x3c);
        rows.push_back(Row{"local dense vs DtoD", fig, raw, 0.9});
    }
    // AFF-SPEED: strided local segments against the 1-D device copy.
    // (c) local strided: 8 KiB rows of a 16 KiB-pitch source, read + write counted.
    {
        const int64_t W = 1024, R = int64_t(bytes) / (16 * W);  // 8-byte elements
        const std::vector<xmc_segment> segs = {segment(0, 0, {R, W}, 0, {2 * W, 1}, 0, {W, 1})};
        std::vector<Rank> ranks(1);
        ranks[0].src = dense(a0, 0, {R, 2 * W}), ranks[0].tgt = dense(b0, 0, {R, W});
        const size_t moved = size_t(R * W * 8);
        CK(d.cuCtxSetCurrent(ctx[0]));
        const double raw1d = raw_bw(2.0 * double(moved), [&] { CK(d.cuMemcpyDtoDAsync_v2(P(b0), P(a0), moved, s[0])); });
        CUDA_MEMCPY2D m{};
        m.srcMemoryType = CU_MEMORYTYPE_DEVICE, m.srcDevice = P(a0), m.srcPitch = size_t(16 * W);
        m.dstMemoryType = CU_MEMORYTYPE_DEVICE, m.dstDevice = P(b0), m.dstPitch = size_t(8 * W);
        m.WidthInBytes = size_t(8 * W), m.Height = size_t(R);
        const double raw2d = raw_bw(2.0 * double(moved), [&] { CK(d.cuMemcpy2DAsync_v2(&m, s[0])); });
        const double fig = xmc_bw(2.0 * double(moved), segs, ranks, 8);
        rows.push_back(Row{"local 8 KiB rows (16 KiB pitch) vs 1-D DtoD", fig, raw1d, 0.7});
        rows.push_back(Row{"local 8 KiB rows (16 KiB pitch) vs raw 2-D", fig, raw2d, 0});
    }

    std::printf("\n%-46s %12s %16s %7s  %s\n", "path", "xmc GB/s", "peak GB/s (run)", "ratio", "target");
    bool missed = false;
    for (const Row &r : rows) {
        char target[48] = "";
        if (r.target > 0) {
            const bool ok = r.ratio() >= r.target;
            missed |= !ok;
            std::snprintf(target, sizeof target, "AFF-SPEED >= %.2f %s", r.target, ok ? "ok" : "MISSED");
        }
        std::printf("%-46s %12.1f %16.1f %7.3f  %s\n", r.path.c_str(), r.figure, r.peak, r.ratio(), target);
    }
    std::printf("data check (dense and reshard cases): %s\n", data_ok ? "ok" : "FAILED");
    if (!json_path.empty()) {
        std::ofstream js(json_path);
        js << "{\"device\":\"" << name << "\",\"devices\":" << ndev << ",\"driver\":" << drv_version
           << ",\"bytes\":" << bytes << ",\"rows\":[";
        for (size_t i = 0; i < rows.size(); ++i)
            js << (i ? "," : "") << "{\"path\":\"" << rows[i].path << "\",\"unit\":\"GB/s\",\"figure\":" << rows[i].figure
               << ",\"peak\":" << rows[i].peak << ",\"ratio\":" << rows[i].ratio() << ",\"target\":" << rows[i].target
               << "}";
        js << "]}\n";
    }
    api->stream_destroy(inst, xs[0]);
    api->stream_destroy(inst, xs[1]);
    for (void *p : {a0, b0, a1, b1}) api->dev_free(inst, p);
    api->close(inst);
    for (int g = 0; g < 2; ++g) {
        d.cuCtxSetCurrent(ctx[g]);
        d.cuStreamDestroy_v2(s[g]);
        d.cuDevicePrimaryCtxRelease_v2(dev[g]);
    }
    d.cuCtxSetCurrent(nullptr);
    if (missed)
        std::printf("xmc_gpu_transfer_bench: a target was missed%s\n",
                    check_targets ? "" : " (reported; --check-targets makes it fail)");
    return (check_targets && missed) || !data_ok ? 1 : 0;
}
