// xmc_gpu_bench: each figure of a backend (through the xmc ABI) next to the
// platform peak measured in the same run with raw CUDA driver calls, as a
// ratio (SPEC 10). Needs a real GPU; on a machine without one it says so and
// exits 77 (a skip with its reason), or 1 with --require-gpu.
//
//   xmc_gpu_bench [--backend cuda] [--bytes N] [--reg-max N] [--json FILE] [--min-ratio R]
//                 [--check-targets] [--require-gpu] [--peaks-only] [--options K=V;...]
// The platform peaks are timed as nvbandwidth times them (CUDA events around
// several queued copies, the median of 5 samples); --peaks-only measures them
// alone (hardware/nvbandwidth.sh sets them beside nvbandwidth's). A row beside
// the raw driver's same work is measured in pairs (raw and backend back to back)
// and its JSON carries the median of the per-pair ratios with their quartiles
// and extremes (samples, ratio_lo, ratio_hi, ratio_min, ratio_max), which
// `xmc bench` judges (a spread across the target: noisy).
// Rows tagged with a requirement (REG-SPEED, VMM-SPEED, PIN-DEVICE) carry the
// target ratio of kTargets at the sizes it names; --check-targets fails the
// run when one is missed.
// VMM-SPEED rows: the reload of a remapped slot (the deferred copy alone,
// launch to done) against the raw copy into a freshly mapped range (and,
// for information, pinned H2D); the whole release+remap+reload and one
// granule's full slot cycle against the raw driver doing the same calls and
// copy at every size from 16 MiB to 1 GiB (up to --bytes), raw and backend
// interleaved; one granule's full slot cycle against the raw driver doing the
// same calls and copy; a graph launch reading a reloaded slot against the same
// graph over a slot never released; the release hand-off (submit to done on an
// idle stream), whose excess over the raw unmap+release is printed as the
// hand-off latency; and, for the CUDA backend, where a slot request's time
// goes (XMC_CUDA_SLOT_PHASES: stream point seen, worker picked it up, driver
// calls done, copy enqueued, copy seen done).
#include "gpu_bench.hpp"

using namespace xmc_gpu_bench;

int main(int argc, char **argv) {
    std::string backend_name = "cuda", json_path;
    size_t bytes = size_t{1} << 30;
    size_t reg_max = size_t{4} << 30;
    double min_ratio = 0;
    bool require_gpu = false, check_targets = false, peaks_only = false;
    int min_devices = 1;
    std::string open_options;  // the backend's open options (e.g. vmm_workers=N), for experiments
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
        if (a == "--backend") backend_name = next();
        else if (a == "--bytes") bytes = std::stoull(next());
        else if (a == "--reg-max") reg_max = std::stoull(next());
        else if (a == "--json") json_path = next();
        else if (a == "--min-ratio") min_ratio = std::stod(next());
        else if (a == "--require-gpu") require_gpu = true;
        else if (a == "--check-targets") check_targets = true;
        else if (a == "--peaks-only") peaks_only = true;
        else if (a == "--min-devices") min_devices = std::stoi(next());
        else if (a == "--options") open_options = next();
        else { std::fprintf(stderr, "usage: xmc_gpu_bench [--backend B] [--bytes N] [--json F] [--min-ratio R] [--require-gpu] [--peaks-only] [--options K=V;...]\n"); return 2; }
    }
    const char *drv_path = std::getenv("XMC_CUDA_DRIVER") ? std::getenv("XMC_CUDA_DRIVER") : "libcuda.so.1";
    Driver d;
    int ndev = 0;
    if (!d.load(drv_path) || d.cuInit(0) != CUDA_SUCCESS || d.cuDeviceGetCount(&ndev) != CUDA_SUCCESS || ndev == 0) {
        // 77: ctest's SKIP_RETURN_CODE, with the reason printed.
        std::printf("xmc_gpu_bench: skipped: no GPU (no CUDA driver %s, or no device)\n", drv_path);
        return require_gpu ? 1 : 77;
    }
    if (ndev < min_devices) {
        std::printf("xmc_gpu_bench: skipped: needs %d GPUs, the driver reports %d\n", min_devices, ndev);
        return require_gpu ? 1 : 77;
    }
    int drv_version = 0;
    d.cuDriverGetVersion(&drv_version);
    char name[256] = {};
    CUdevice dev0;
    CK(d.cuDeviceGet(&dev0, 0));
    d.cuDeviceGetName(name, sizeof name, dev0);
    CUcontext ctx0;
    CK(d.cuDevicePrimaryCtxRetain(&ctx0, dev0));
    CK(d.cuCtxSetCurrent(ctx0));
    CUstream s;
    CK(d.cuStreamCreate(&s, 1));
    std::printf("xmc_gpu_bench: %d x %s, driver %d, %zu MiB transfers\n", ndev, name, drv_version, bytes >> 20);

    // ---- peaks, raw driver ----
    // The pinned peak's buffer: cuMemHostAlloc (cudaHostAlloc's driver call);
    // a driver without it gets registered page-aligned memory.
    void *hpinned = nullptr;
    if (d.cuMemHostAlloc) {
        CK(d.cuMemHostAlloc(&hpinned, bytes, 0));
    } else {
        hpinned = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
        CK(d.cuMemHostRegister_v2(hpinned, bytes, 0));
    }
    // Page-aligned pageable memory, so that registering it needs no rounding.
    char *pageable = static_cast<char *>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
    std::memset(hpinned, 0x5a, bytes);
    std::memset(pageable, 0x5b, bytes);
    CUdeviceptr dbuf, dbuf2;
    CK(d.cuMemAlloc_v2(&dbuf, bytes));
    CK(d.cuMemAlloc_v2(&dbuf2, bytes));
    const double gb = static_cast<double>(bytes) / 1e9;
    // A peak, timed as nvbandwidth times it (SPEC 10, 0.3): CUDA events around
    // several queued copies, the median of several samples (after one warm-up
    // sample). One copy and a host synchronize add 7-8 us of launch and wake-up,
    // which put the 256 MiB device-copy peak 6% under nvbandwidth's on the H200.
    CUevent ev0, ev1;
    CK(d.cuEventCreate(&ev0, 0));
    CK(d.cuEventCreate(&ev1, 0));
    // At least 128 MiB a sample (8 copies of 16 MiB, 2 of 1 GiB): the events then time a few
    // milliseconds of copying, in which the host enqueues the next copy long before the GPU
    // wants it (a copy of 16 MiB takes 0.3 ms at 55 GB/s, its enqueue a few us).
    const int copies = static_cast<int>(std::clamp<size_t>((size_t{128} << 20) / std::max<size_t>(bytes, 1), 2, 8));
    auto bw = [&](const std::function<void()> &enqueue, double count_bytes) {
        std::vector<double> t;
        for (int sample = 0; sample < 6; ++sample) {
            CK(d.cuEventRecord(ev0, s));
            for (int c = 0; c < copies; ++c) enqueue();
            CK(d.cuEventRecord(ev1, s));
            CK(d.cuEventSynchronize(ev1));
            float ms = 0;
            CK(d.event_elapsed(&ms, ev0, ev1));
            if (sample > 0 && ms > 0) t.push_back(ms / 1e3 / copies);  // the first warms up
        }
        const double m = median_of(t);
        return m > 0 ? count_bytes / 1e9 / m : 0.0;
    };
    // Warm-up before any figure: the first process of a run measured its 16 MiB rows at 0.93-0.94
    // of what the next ones did (clocks, the copy engines' first use).
    for (const double until = now_s() + 0.3; now_s() < until;) {
        CK(d.cuMemcpyDtoDAsync_v2(dbuf2, dbuf, bytes, s));
        CK(d.cuMemcpyHtoDAsync_v2(dbuf, hpinned, bytes, s));
        CK(d.cuStreamSynchronize(s));
    }
    // REG-SPEED, VMM-SPEED: the pinned peaks (cuMemHostAlloc) their rows are held to.
    const std::function<void()> raw_h2d = [&] {
        CK(d.cuMemcpyHtoDAsync_v2(dbuf, hpinned, bytes, s));
        CK(d.cuStreamSynchronize(s));
    };
    const std::function<void()> raw_d2h = [&] {
        CK(d.cuMemcpyDtoHAsync_v2(hpinned, dbuf, bytes, s));
        CK(d.cuStreamSynchronize(s));
    };
    const double peak_h2d = bw([&] { CK(d.cuMemcpyHtoDAsync_v2(dbuf, hpinned, bytes, s)); }, gb * 1e9);
    const double peak_d2h = bw([&] { CK(d.cuMemcpyDtoHAsync_v2(hpinned, dbuf, bytes, s)); }, gb * 1e9);
    const double peak_pageable = bw([&] { CK(d.cuMemcpyHtoDAsync_v2(dbuf, pageable, bytes, s)); }, gb * 1e9);
    // Registration timing by size, up to --reg-max (default 4 GiB).
    char *reg_buf = static_cast<char *>(std::aligned_alloc(4096, reg_max));
    std::memset(reg_buf, 1, reg_max);
    bool data_ok = true;
    const double peak_d2d = bw([&] { CK(d.cuMemcpyDtoDAsync_v2(dbuf2, dbuf, bytes, s)); }, 2 * gb * 1e9);
    const size_t row = 8192, rows = bytes / (2 * row);  // 2-D: 8 KiB rows at a 16 KiB pitch
    CUDA_MEMCPY2D m2{};
    m2.srcMemoryType = CU_MEMORYTYPE_DEVICE; m2.srcDevice = dbuf; m2.srcPitch = 2 * row;
    m2.dstMemoryType = CU_MEMORYTYPE_DEVICE; m2.dstDevice = dbuf2; m2.dstPitch = 2 * row;
    m2.WidthInBytes = row; m2.Height = rows;
    const double peak_2d = bw([&] { CK(d.cuMemcpy2DAsync_v2(&m2, s)); }, 2.0 * row * rows);
    // --peaks-only: the copy peaks alone, for hardware/nvbandwidth.sh to set beside
    // nvbandwidth's host_to_device_memcpy_ce, device_to_host_memcpy_ce and
    // device_local_copy (which counts a device copy's bytes once: d2d_copy here).
    // Every buffer made above goes back on each way out (--peaks-only leaked them: LeakSanitizer).
    auto release_buffers = [&] {
        d.cuMemFree_v2(dbuf);
        d.cuMemFree_v2(dbuf2);
        if (d.cuMemFreeHost) {
            d.cuMemFreeHost(hpinned);
        } else {
            d.cuMemHostUnregister(hpinned);
            std::free(hpinned);
        }
        std::free(pageable);
        std::free(reg_buf);
    };
    if (peaks_only) {
        std::printf("xmc_gpu_bench: peaks at %s (events around %d queued copies, median of 5 samples): H2D %.2f GB/s, "
                    "D2H %.2f, D2D copy %.2f (read+write %.2f)\n",
                    human(bytes).c_str(), copies, peak_h2d, peak_d2h, peak_d2d / 2, peak_d2d);
        if (!json_path.empty()) {
            std::ofstream js(json_path);
            js << "{\"device\":\"" << name << "\",\"devices\":" << ndev << ",\"driver\":" << drv_version
               << ",\"bytes\":" << bytes << ",\"copies\":" << copies << ",\"peaks\":{\"h2d\":" << peak_h2d
               << ",\"d2h\":" << peak_d2h << ",\"d2d_copy\":" << peak_d2d / 2 << ",\"pageable_h2d\":" << peak_pageable
               << "},\"rows\":[]}\n";
        }
        release_buffers();
        return 0;
    }
    // registration of existing memory, and copies from it
    const double t_reg = median_time(3, [&] { CK(d.cuMemHostRegister_v2(pageable, bytes, 0)); CK(d.cuMemHostUnregister(pageable)); });
    CK(d.cuMemHostRegister_v2(pageable, bytes, 0));
    const double peak_reg_h2d = bw([&] { CK(d.cuMemcpyHtoDAsync_v2(dbuf, pageable, bytes, s)); }, gb * 1e9);
    CK(d.cuMemHostUnregister(pageable));
    // host callback round trip
    auto noop = [](void *) {};
    const double t_cb = median_time(200, [&] { CK(d.cuLaunchHostFunc(s, noop, nullptr)); CK(d.cuStreamSynchronize(s)); });
    // VMM: one granule full cycle (reserve, create, map, access, unmap, release, free)
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    // The backend creates slot memory exportable as a POSIX descriptor where the device can (so
    // that a slot can be an IPC source); the raw figures ask for the same, or they would time
    // cheaper allocations than the backend's and blame it for the difference.
    int posix_fd = 0;
    if (d.cuDeviceGetAttribute(&posix_fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev0) ==
            CUDA_SUCCESS &&
        posix_fd)
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    std::printf("xmc_gpu_bench: raw VMM allocations %s, as the backend's slots\n",
                posix_fd ? "exportable as POSIX descriptors" : "not exportable");
    size_t gran = 0;
    CK(d.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemAccessDesc acc{};
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    auto vmm_cycle = [&](size_t n) {
        CUdeviceptr va; CUmemGenericAllocationHandle h;
        CK(d.cuMemAddressReserve(&va, n, 0, 0, 0));
        CK(d.cuMemCreate(&h, n, &prop, 0));
        CK(d.cuMemMap(va, n, 0, h, 0));
        CK(d.cuMemSetAccess(va, n, &acc, 1));
        CK(d.cuMemUnmap(va, n));
        CK(d.cuMemRelease(h));
        CK(d.cuMemAddressFree(va, n));
    };
    const double t_granule = median_time(50, [&] { vmm_cycle(gran); });
    // VMM-SPEED: the raw driver's figures for the same slot cycles.
    // The raw driver doing what the backend's slot cycles do, for their peaks
    // (comparing a slot cycle with fewer calls and no copy would blame the
    // backend for work the raw figure never did):
    //  - release + remap + reload of an n-byte range: unmap, release, create,
    //    map, access, copy n bytes from pinned memory, synchronize;
    //  - one granule's full cycle as the bench runs it below: reserve, create,
    //    map, access (slot_create), unmap, release (release), create, map,
    //    access, copy (remap), unmap, release, free (slot_close).
    auto vmm_map = [&](CUdeviceptr va, size_t n, CUmemGenericAllocationHandle *h) {
        CK(d.cuMemCreate(h, n, &prop, 0));
        CK(d.cuMemMap(va, n, 0, *h, 0));
        CK(d.cuMemSetAccess(va, n, &acc, 1));
    };
    auto vmm_unmap = [&](CUdeviceptr va, size_t n, CUmemGenericAllocationHandle h) {
        CK(d.cuMemUnmap(va, n));
        CK(d.cuMemRelease(h));
    };
    const size_t slot_bytes = (bytes + gran - 1) / gran * gran;
    const std::function<void()> raw_granule_slot = [&] {
        CUdeviceptr g;
        CUmemGenericAllocationHandle gh;
        CK(d.cuMemAddressReserve(&g, gran, 0, 0, 0));
        vmm_map(g, gran, &gh);
        vmm_unmap(g, gran, gh);
        vmm_map(g, gran, &gh);
        CK(d.cuMemcpyHtoDAsync_v2(g, hpinned, gran, s));
        CK(d.cuStreamSynchronize(s));
        vmm_unmap(g, gran, gh);
        CK(d.cuMemAddressFree(g, gran));
    };
    // The raw unmap + release of one granule mapped at `g` (reserved by the caller).
    const std::function<double(CUdeviceptr)> raw_unmap_at = [&](CUdeviceptr g) {
        CUmemGenericAllocationHandle gh;
        vmm_map(g, gran, &gh);
        const double t0 = now_s();
        vmm_unmap(g, gran, gh);
        return now_s() - t0;
    };
    double t_raw_reload_cycle = 0, t_raw_granule_slot = 0, t_raw_fresh_copy = 0;
    if (bytes >= gran) {
        CUdeviceptr va;
        CUmemGenericAllocationHandle h;
        CK(d.cuMemAddressReserve(&va, slot_bytes, 0, 0, 0));
        vmm_map(va, slot_bytes, &h);
        t_raw_reload_cycle = median_time(5, [&] {
            vmm_unmap(va, slot_bytes, h);
            vmm_map(va, slot_bytes, &h);
            CK(d.cuMemcpyHtoDAsync_v2(va, hpinned, bytes, s));
            CK(d.cuStreamSynchronize(s));
        });
        // The copy alone into a range mapped just before (unmap and map are
        // not timed): what a reload can reach on this platform.
        {
            std::vector<double> t;
            for (int i = 0; i < 5; ++i) {
                vmm_unmap(va, slot_bytes, h);
                vmm_map(va, slot_bytes, &h);
                const double t0 = now_s();
                CK(d.cuMemcpyHtoDAsync_v2(va, hpinned, bytes, s));
                CK(d.cuStreamSynchronize(s));
                t.push_back(now_s() - t0);
            }
            std::sort(t.begin(), t.end());
            t_raw_fresh_copy = t[t.size() / 2];
        }
        vmm_unmap(va, slot_bytes, h);
        CK(d.cuMemAddressFree(va, slot_bytes));
        t_raw_granule_slot = median_time(50, raw_granule_slot);
    }
    // peer copy
    double peak_peer = 0;
    CUcontext ctx1 = nullptr;
    CUdeviceptr dpeer = 0;
    if (ndev >= 2) {
        CUdevice dev1;
        CK(d.cuDeviceGet(&dev1, 1));
        CK(d.cuDevicePrimaryCtxRetain(&ctx1, dev1));
        CK(d.cuCtxSetCurrent(ctx1));
        CK(d.cuMemAlloc_v2(&dpeer, bytes));
        d.cuCtxEnablePeerAccess(ctx0, 0);
        CK(d.cuCtxSetCurrent(ctx0));
        d.cuCtxEnablePeerAccess(ctx1, 0);
        peak_peer = bw([&] { CK(d.cuMemcpyPeerAsync(dpeer, ctx1, dbuf, ctx0, bytes, s)); }, gb * 1e9);
    }

    // ---- the backend's figures, through the xmc ABI ----
    std::vector<Row> rows_out;
    std::string err;
    const auto *lb = xmc::conformance::load_backend(backend_name, &err);
    if (!lb) { std::fprintf(stderr, "xmc_gpu_bench: %s\n", err.c_str()); return 1; }
    const xmc_backend *api = lb->api;
    xmc_instance *inst = nullptr;
    xmc_open_params op{sizeof op, open_options.empty() ? nullptr : open_options.c_str()};
    if (api->open(&op, &inst) != XMC_OK) { std::fprintf(stderr, "xmc_gpu_bench: open failed\n"); return 1; }
    xmc_stream *xs = nullptr;
    const bool can_copy = (api->capabilities & (XMC_CAP_COPY | XMC_CAP_STREAM)) == (XMC_CAP_COPY | XMC_CAP_STREAM);
    auto xcopy = [&](void *src, xmc_mem_kind sk, void *dst, xmc_mem_kind dk, size_t w, size_t h, size_t pitch) {
        xmc_copy_desc c{};
        c.src.ptr = src; c.src.kind = sk; c.src.device = 0; c.src.pitch = pitch; c.src.slice_pitch = pitch * h;
        c.dst.ptr = dst; c.dst.kind = dk; c.dst.device = 0; c.dst.pitch = pitch; c.dst.slice_pitch = pitch * h;
        c.width_bytes = w; c.height = h; c.depth = 1;
        if (api->copy(inst, &c, xs) != XMC_OK) { std::fprintf(stderr, "xmc_gpu_bench: copy failed\n"); std::exit(1); }
        api->stream_synchronize(inst, xs);
    };
    auto row_of = [bytes](std::string path, std::string unit, double figure, double peak, bool higher = true,
                          const char *target_key = "") {
        Row r{path, unit, figure, peak, higher, "", 0, {}};
        for (const Target &t : kTargets)
            if (std::strcmp(t.key, target_key) == 0 && bytes >= t.min_bytes && bytes <= t.max_bytes) {
                r.requirement = t.requirement;
                r.target = t.ratio;
            }
        return r;
    };
    auto paired = [](Row r, const PairedMedians &p) {
        r.pairs = p.ratios;
        return r;
    };
    if (can_copy && api->stream_create(inst, 0, &xs) == XMC_OK) {
        void *xdev = nullptr, *xdev2 = nullptr;
        api->dev_alloc(inst, 0, bytes, &xdev);
        api->dev_alloc(inst, 0, bytes, &xdev2);
        // Host to device and back, from each kind of host memory, against the
        // cuMemHostAlloc peak (the pinned and registered targets: 0.97).
        // Pageable copies swing from run to run (the driver stages them): each beside the raw
        // copy taken in turns with it. The driver stages a pageable copy one way for
        // cuMemcpyHtoD/DtoH and another for a one-row cuMemcpy2D (the backend's call): on an H100
        // the backend's 2-D copy beat the 1-D "peak" by 5-8% in some runs (1.056 at 1 GiB H2D,
        // 1.076 at 16 MiB D2H), a broken measurement that failed a correct backend. So the raw
        // side of each pair is the faster of the two ways, timed back to back: a peak.
        {
            auto timed = [&](const std::function<void()> &fn) {
                const double t0 = now_s();
                fn();
                CK(d.cuStreamSynchronize(s));
                return now_s() - t0;
            };
            auto one_row = [&](bool h2d) {
                CUDA_MEMCPY2D c{};
                c.srcMemoryType = h2d ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
                c.srcHost = h2d ? pageable : nullptr;
                c.srcDevice = h2d ? 0 : dbuf;
                c.srcPitch = bytes;
                c.dstMemoryType = h2d ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
                c.dstHost = h2d ? nullptr : pageable;
                c.dstDevice = h2d ? dbuf : 0;
                c.dstPitch = bytes;
                c.WidthInBytes = bytes;
                c.Height = 1;
                return c;
            };
            const CUDA_MEMCPY2D h2d_row = one_row(true), d2h_row = one_row(false);
            auto best_raw = [&](bool h2d) {
                return [&, h2d] {
                    const double a = timed([&] {
                        if (h2d) CK(d.cuMemcpyHtoDAsync_v2(dbuf, pageable, bytes, s));
                        else CK(d.cuMemcpyDtoHAsync_v2(pageable, dbuf, bytes, s));
                    });
                    const double b = timed([&] { CK(d.cuMemcpy2DAsync_v2(h2d ? &h2d_row : &d2h_row, s)); });
                    return std::min(a, b);
                };
            };
            const PairedMedians h = paired_measured(9, best_raw(true), [&] {
                const double t0 = now_s();
                xcopy(pageable, XMC_MEM_HOST, xdev, XMC_MEM_DEVICE, bytes, 1, bytes);  // synchronizes its stream
                return now_s() - t0;
            });
            rows_out.push_back(paired(row_of("H2D from pageable", "GB/s", gb / h.x, gb / h.raw), h));
            const PairedMedians g2 = paired_measured(9, best_raw(false), [&] {
                const double t0 = now_s();
                xcopy(xdev, XMC_MEM_DEVICE, pageable, XMC_MEM_HOST, bytes, 1, bytes);  // synchronizes its stream
                return now_s() - t0;
            });
            rows_out.push_back(paired(row_of("D2H to pageable", "GB/s", gb / g2.x, gb / g2.raw), g2));
        }
        xmc_pin_result pr{};
        if (api->pin_alloc(inst, bytes, 4096, 0, &pr) == XMC_OK) {
            std::memset(pr.base, 0x11, bytes);
            // Each beside the cuMemHostAlloc copy taken in turns with it (measured in two blocks,
            // the H200 gave 0.905 in one run and 1.000 in the next).
            const PairedMedians ph = paired_time(9, raw_h2d, [&] {
                xcopy(pr.base, XMC_MEM_PINNED, xdev, XMC_MEM_DEVICE, bytes, 1, bytes);
            });
            rows_out.push_back(paired(row_of("H2D from pinned (pin_alloc, device 0)", "GB/s", gb / ph.x, gb / ph.raw,
                                             true, "pinned"), ph));
            const PairedMedians pd = paired_time(9, raw_d2h, [&] {
                xcopy(xdev, XMC_MEM_DEVICE, pr.base, XMC_MEM_PINNED, bytes, 1, bytes);
            });
            rows_out.push_back(paired(row_of("D2H to pinned (pin_alloc, device 0)", "GB/s", gb / pd.x, gb / pd.raw,
                                             true, "pinned"), pd));
            // Independent check: the bytes arrived (device -> pinned -> compare).
            xcopy(pr.base, XMC_MEM_PINNED, xdev, XMC_MEM_DEVICE, bytes, 1, bytes);
            std::memset(pr.base, 0, bytes);
            xcopy(xdev, XMC_MEM_DEVICE, pr.base, XMC_MEM_PINNED, bytes, 1, bytes);
            const auto *b = static_cast<const unsigned char *>(pr.base);
            data_ok &= b[0] == 0x11 && b[bytes / 2] == 0x11 && b[bytes - 1] == 0x11;
            api->pin_free(inst, pr.base);
        }
        // REG-SPEED: copies from and to registered memory against the pinned peaks.
        if (api->capabilities & XMC_CAP_REGISTER) {
            xmc_reg_info ri{};
            if (api->reg_register(inst, pageable, bytes, 0, 0, &ri) == XMC_OK) {
                const PairedMedians rh = paired_time(9, raw_h2d, [&] {
                    xcopy(pageable, XMC_MEM_REGISTERED, xdev, XMC_MEM_DEVICE, bytes, 1, bytes);
                });
                rows_out.push_back(paired(row_of("H2D from registered (REG-SPEED)", "GB/s", gb / rh.x, gb / rh.raw,
                                                 true, "registered"), rh));
                const PairedMedians rd = paired_time(9, raw_d2h, [&] {
                    xcopy(xdev, XMC_MEM_DEVICE, pageable, XMC_MEM_REGISTERED, bytes, 1, bytes);
                });
                rows_out.push_back(paired(row_of("D2H to registered (REG-SPEED)", "GB/s", gb / rd.x, gb / rd.raw,
                                                 true, "registered"), rd));
                api->reg_unregister(inst, ri.base);
            }
            // Register + unregister time by size, against the raw driver calls.
            for (size_t n = 4096; n <= reg_max; n *= 16) {
                const int reps = n < (size_t{64} << 20) ? 20 : n < (size_t{1} << 30) ? 9 : 3;  // 3 left 256 MiB at 0.89-1.16
                const PairedMedians m = paired_time(reps, [&] {
                    CK(d.cuMemHostRegister_v2(reg_buf, n, 0));
                    CK(d.cuMemHostUnregister(reg_buf));
                }, [&] {
                    if (api->reg_register(inst, reg_buf, n, 0, 0, &ri) != XMC_OK) std::exit(1);
                    api->reg_unregister(inst, ri.base);
                });
                rows_out.push_back(paired(row_of("register+unregister " + human(n), "ms", m.x * 1e3, m.raw * 1e3, false), m));
            }
        }
        // The device copy beside the raw copy of the same bytes timed the same way (one copy and a
        // synchronize, in pairs): against the event-timed peak, the backend's own synchronize counted
        // against it (and one lucky sample reached 1.08 of a block-timed raw copy on the H200).
        {
            // Each sample is `q` copies queued and one synchronize (16, about 0.2 ms, at 16 MiB): one ~10 us
            // copy per sample put its pairs' quartiles at 0.84-1.10 on an H100.
            const int q = static_cast<int>(std::clamp<size_t>((size_t{256} << 20) / bytes, 1, 64));
            const PairedMedians dd = paired_time(15, [&] {
                for (int k = 0; k < q; ++k) CK(d.cuMemcpyDtoDAsync_v2(dbuf2, dbuf, bytes, s));
                CK(d.cuStreamSynchronize(s));
            }, [&] {
                for (int k = 0; k < q; ++k) {
                    xmc_copy_desc c{};
                    c.src = {xdev, XMC_MEM_DEVICE, 0, 0, 0, 0, bytes, bytes};
                    c.dst = {xdev2, XMC_MEM_DEVICE, 0, 0, 0, 0, bytes, bytes};
                    c.width_bytes = bytes;
                    c.height = c.depth = 1;
                    if (api->copy(inst, &c, xs) != XMC_OK) std::exit(1);
                }
                api->stream_synchronize(inst, xs);
            });
            rows_out.push_back(paired(row_of("D2D copy (read+write)", "GB/s", 2 * q * gb / dd.x, 2 * q * gb / dd.raw), dd));
        }
        // 2-D copy efficiency by row width: pitch = 2 x width, against the raw
        // driver's own 2-D copy and against the 1-D device copy.
        for (size_t w : {size_t{256}, size_t{1024}, size_t{8192}, size_t{65536}}) {
            const size_t h = bytes / (2 * w);
            CUDA_MEMCPY2D c2{};
            c2.srcMemoryType = CU_MEMORYTYPE_DEVICE; c2.srcDevice = dbuf; c2.srcPitch = 2 * w;
            c2.dstMemoryType = CU_MEMORYTYPE_DEVICE; c2.dstDevice = dbuf2; c2.dstPitch = 2 * w;
            c2.WidthInBytes = w; c2.Height = h;
            // The 1-D copy moves the same w x h bytes, in turns with the other two (timed apart, one
            // run's 2-D rows came out against a 1-D peak measured while the GPU was in another state).
            const auto [p2, p1] = paired_time2(9, [&] {
                CK(d.cuMemcpy2DAsync_v2(&c2, s));
                CK(d.cuStreamSynchronize(s));
            }, [&] {
                CK(d.cuMemcpyDtoDAsync_v2(dbuf2, dbuf, w * h, s));
                CK(d.cuStreamSynchronize(s));
            }, [&] { xcopy(xdev, XMC_MEM_DEVICE, xdev2, XMC_MEM_DEVICE, w, h, 2 * w); });
            const double moved = 2.0 * static_cast<double>(w * h) / 1e9;
            rows_out.push_back(paired(row_of("D2D 2-D rows of " + human(w) + " vs raw 2-D", "GB/s", moved / p2.x,
                                             moved / p2.raw), p2));
            rows_out.push_back(paired(row_of("D2D 2-D rows of " + human(w) + " vs 1-D copy", "GB/s", moved / p1.x,
                                             moved / p1.raw), p1));
        }
        struct Flag { std::atomic<int> n{0}; } flag;
        const PairedMedians cb = paired_time(200, [&] {
            CK(d.cuLaunchHostFunc(s, noop, nullptr));
            CK(d.cuStreamSynchronize(s));
        }, [&] {
            api->host_callback(inst, xs, [](void *u) { static_cast<Flag *>(u)->n++; }, &flag);
            api->stream_synchronize(inst, xs);
        });
        rows_out.push_back(paired(row_of("host callback round trip", "us", cb.x * 1e6, cb.raw * 1e6, false), cb));
        api->dev_free(inst, xdev);
        api->dev_free(inst, xdev2);
        api->stream_destroy(inst, xs);
    }
    if (api->capabilities & XMC_CAP_VMM) {
        // VMM-SPEED: release + remap + reload of a slot against pinned H2D,
        // and one granule's full cycle against the raw driver calls.
        xmc_pin_result src{};
        xmc_stream *vs = nullptr;
        // Registered with device 0, as a reload source is in practice: an
        // unregistered source copies at pageable speed.
        if (api->pin_alloc(inst, bytes, 4096, 0, &src) == XMC_OK &&
            api->stream_create(inst, 0, &vs) == XMC_OK) {
            std::memset(src.base, 0x3c, bytes);
            xmc_slot *slot = nullptr;
            xmc_slot_info si{};
            if (api->slot_create(inst, 0, bytes, &slot, &si) == XMC_OK) {
                // Reload of a remapped slot (SPEC 10's "reload of a remapped
                // 1 GiB slot from pinned memory"): release, remap with the copy
                // deferred, and time only the launched copy until the backend
                // reports it done, against pinned H2D.
                // In pairs with the raw copy into a range mapped just before (a reload at 1.14 of
                // a fresh-mapping copy measured in another block, 0.82-0.93 in others, on the H200).
                // Pinned H2D of the same bytes is taken in the same turns, for the row against it.
                PairedMedians fresh{}, pinned{};
                {
                    std::vector<double> t, traw, th2d;
                    CUdeviceptr rva = 0;
                    CUmemGenericAllocationHandle rh{};
                    if (t_raw_fresh_copy > 0) {
                        CK(d.cuMemAddressReserve(&rva, slot_bytes, 0, 0, 0));
                        vmm_map(rva, slot_bytes, &rh);
                    }
                    for (int i = 0; i < 16; ++i) {
                        {
                            const double t0 = now_s();
                            raw_h2d();
                            if (i > 0) th2d.push_back(now_s() - t0);
                        }
                        if (rva) {
                            vmm_unmap(rva, slot_bytes, rh);
                            vmm_map(rva, slot_bytes, &rh);
                            const double t0 = now_s();
                            CK(d.cuMemcpyHtoDAsync_v2(rva, hpinned, bytes, s));
                            CK(d.cuStreamSynchronize(s));
                            if (i > 0) traw.push_back(now_s() - t0);
                        }
                        xmc_request *r1 = nullptr, *r2 = nullptr;
                        api->slot_release(inst, slot, vs, &r1);
                        api->slot_remap(inst, slot, vs, src.base, si.size, XMC_REMAP_DEFER_COPY, &r2);
                        api->request_wait(inst, r2, 60000);  // mapped
                        const double t0 = now_s();
                        api->request_launch_copy(inst, r2, 0, vs);
                        if (api->request_wait(inst, r2, 60000) != XMC_OK) std::exit(1);
                        if (i > 0) t.push_back(now_s() - t0);  // the first run warms up
                        api->request_adopt(inst, r2);
                        api->request_destroy(inst, r1);
                        api->request_destroy(inst, r2);
                    }
                    pinned = pairs_of(th2d, t);
                    if (rva) {
                        vmm_unmap(rva, slot_bytes, rh);
                        CK(d.cuMemAddressFree(rva, slot_bytes));
                        fresh = pairs_of(traw, t);
                    }
                }
                // The peak is the raw copy into a range mapped just before: on
                // the H200 it reaches 0.94 of pinned H2D (SPEC 10 measured
                // 51.6 GB/s for it), so pinned H2D is shown for information.
                if (!fresh.ratios.empty())
                    rows_out.push_back(paired(row_of("VMM reload of a remapped slot " + human(bytes) +
                                                         " vs raw copy into a fresh mapping",
                                                     "GB/s", gb / fresh.x, gb / fresh.raw, true, "reload"), fresh));
                rows_out.push_back(paired(row_of("VMM reload of a remapped slot " + human(bytes) + " vs pinned H2D",
                                                 "GB/s", gb / pinned.x, gb / pinned.raw), pinned));
                // The whole release + remap + reload beside pinned H2D, in turns (the raw driver
                // calls doing the same: the rows by size below).
                const PairedMedians cyc = paired_time(9, raw_h2d, [&] {
                    xmc_request *r1 = nullptr, *r2 = nullptr;
                    api->slot_release(inst, slot, vs, &r1);
                    api->request_wait(inst, r1, 60000);
                    api->slot_remap(inst, slot, vs, src.base, si.size, 0, &r2);
                    api->request_wait(inst, r2, 60000);
                    api->request_adopt(inst, r2);
                    api->request_destroy(inst, r1);
                    api->request_destroy(inst, r2);
                });
                rows_out.push_back(paired(row_of("VMM release+remap+reload " + human(bytes) + " vs pinned H2D", "GB/s",
                                                 gb / cyc.x, gb / cyc.raw), cyc));
                api->slot_close(inst, slot);
            }
            // VMM-SPEED: release + remap + reload at every size from 16 MiB to
            // 1 GiB (those up to --bytes), against the raw driver's unmap,
            // release, create, map, access, copy and synchronize of the same
            // size; raw and backend cycles alternate, so drift hits both.
            std::vector<size_t> vmm_sizes;
            for (size_t n : {size_t{16} << 20, size_t{64} << 20, size_t{256} << 20, size_t{1} << 30})
                if (n <= bytes) vmm_sizes.push_back((n + gran - 1) / gran * gran);
            for (size_t n : vmm_sizes) {
                xmc_slot *sl = nullptr;
                xmc_slot_info sli{};
                if (api->slot_create(inst, 0, n, &sl, &sli) != XMC_OK) continue;
                CUdeviceptr va;
                CUmemGenericAllocationHandle h;
                CK(d.cuMemAddressReserve(&va, n, 0, 0, 0));
                vmm_map(va, n, &h);
                std::vector<double> raw_t, xmc_t;
                for (int rep = 0; rep < 16; ++rep) {  // 15 pairs: 7 left the 1 GiB row's quartiles at 0.79-1.18
                    double t0 = now_s();
                    vmm_unmap(va, n, h);
                    vmm_map(va, n, &h);
                    CK(d.cuMemcpyHtoDAsync_v2(va, hpinned, n, s));
                    CK(d.cuStreamSynchronize(s));
                    const double raw = now_s() - t0;
                    xmc_request *r1 = nullptr, *r2 = nullptr;
                    t0 = now_s();
                    api->slot_release(inst, sl, vs, &r1);
                    api->request_wait(inst, r1, 60000);
                    api->slot_remap(inst, sl, vs, src.base, sli.size, 0, &r2);
                    if (api->request_wait(inst, r2, 60000) != XMC_OK) std::exit(1);
                    const double x = now_s() - t0;
                    api->request_adopt(inst, r2);
                    api->request_destroy(inst, r1);
                    api->request_destroy(inst, r2);
                    if (rep == 0) continue;  // warm-up
                    raw_t.push_back(raw);
                    xmc_t.push_back(x);
                }
                vmm_unmap(va, n, h);
                CK(d.cuMemAddressFree(va, n));
                api->slot_close(inst, sl);
                const PairedMedians cy = pairs_of(raw_t, xmc_t);
                const double g = static_cast<double>(n) / 1e9;
                rows_out.push_back(paired(row_of("VMM release+remap+reload " + human(n) + " vs raw calls", "GB/s",
                                                 g / cy.x, g / cy.raw, true, "cycle"), cy));
            }
            // SPEC 10: a graph launch reading a reloaded slot against the same
            // graph (a copy of the slot into device memory) over a slot never
            // released, launches alternating.
            if ((api->capabilities & XMC_CAP_GRAPH) && bytes >= gran) {
                const size_t n = std::min(bytes, size_t{256} << 20) / gran * gran;
                xmc_slot *cyc = nullptr, *kept = nullptr;
                xmc_slot_info ci{}, ki{};
                void *out = nullptr;
                xmc_graph *g_cyc = nullptr, *g_kept = nullptr;
                auto capture_read = [&](const xmc_slot_info &si_, xmc_graph **g) {
                    xmc_copy_desc c{};
                    c.src = {si_.address, XMC_MEM_DEVICE, 0, 0, 0, 0, n, n};
                    c.dst = {out, XMC_MEM_DEVICE, 0, 0, 0, 0, n, n};
                    c.width_bytes = n;
                    c.height = c.depth = 1;
                    return api->graph_begin(inst, vs) == XMC_OK && api->copy(inst, &c, vs) == XMC_OK &&
                           api->graph_end(inst, vs, g) == XMC_OK;
                };
                if (api->slot_create(inst, 0, n, &cyc, &ci) == XMC_OK && api->slot_create(inst, 0, n, &kept, &ki) == XMC_OK &&
                    api->dev_alloc(inst, 0, n, &out) == XMC_OK && capture_read(ci, &g_cyc) && capture_read(ki, &g_kept)) {
                    // `launches` queued launches and one synchronize per sample (8, about 0.1 ms, at
                    // 16 MiB): one ~20 us launch per sample left the 16 MiB row's pairs at
                    // 0.88-1.07 on an H100, noisy against 0.95 in 5 runs of 5.
                    const int launches = static_cast<int>(std::clamp<size_t>((size_t{128} << 20) / n, 1, 8));
                    auto launch_time = [&](xmc_graph *g) {
                        const double t0 = now_s();
                        for (int k = 0; k < launches; ++k) api->graph_launch(inst, g, vs);
                        api->stream_synchronize(inst, vs);
                        return (now_s() - t0) / launches;
                    };
                    auto reload = [&] {
                        xmc_request *r1 = nullptr, *r2 = nullptr;
                        api->slot_release(inst, cyc, vs, &r1);
                        api->request_wait(inst, r1, 60000);
                        api->slot_remap(inst, cyc, vs, src.base, ci.size, 0, &r2);
                        api->request_wait(inst, r2, 60000);
                        api->request_adopt(inst, r2);
                        api->request_destroy(inst, r1);
                        api->request_destroy(inst, r2);
                    };
                    // Each launch follows the same release, remap and reload, so that the two
                    // differ only in whether the slot they read is the reloaded one: on the H200
                    // the first launch after that host work runs at 0.92 of a later one at
                    // 16 MiB whichever slot it reads, which an alternation blamed on the slot.
                    // Which graph goes first alternates, so that an order effect is not the slot's.
                    std::vector<double> t_cyc, t_kept;
                    for (int rep = 0; rep < 32; ++rep) {
                        double a = 0, b = 0;
                        reload();
                        (rep % 2 ? b : a) = launch_time(rep % 2 ? g_kept : g_cyc);
                        reload();
                        (rep % 2 ? a : b) = launch_time(rep % 2 ? g_cyc : g_kept);
                        if (rep == 0) continue;  // warm-up
                        t_cyc.push_back(a);
                        t_kept.push_back(b);
                    }
                    const PairedMedians gr = pairs_of(t_kept, t_cyc);
                    const double g = static_cast<double>(n) / 1e9;
                    rows_out.push_back(paired(row_of("graph reading a reloaded slot " + human(n) + " vs never released",
                                                     "GB/s", g / gr.x, g / gr.raw, true, "graph"), gr));
                } else {
                    std::printf("xmc_gpu_bench: graph row skipped: a slot, buffer or capture of %s failed\n",
                                human(n).c_str());
                }
                if (g_cyc) api->graph_destroy(inst, g_cyc);
                if (g_kept) api->graph_destroy(inst, g_kept);
                if (out) api->dev_free(inst, out);
                if (cyc) api->slot_close(inst, cyc);
                if (kept) api->slot_close(inst, kept);
            }
            // Where a slot request's time goes (the CUDA backend's
            // XMC_CUDA_SLOT_PHASES record, written at close): release and
            // remap + reload cycles at the smallest size above, each step's
            // median in microseconds after the request's submit.
            if (backend_name == "cuda" && !vmm_sizes.empty())
                print_slot_phases(api, vmm_sizes.front(), src.base);
            if (t_raw_granule_slot > 0) {
                const PairedMedians tg = paired_time(50, raw_granule_slot, [&] {
                    xmc_slot *g = nullptr; xmc_slot_info gi{}; xmc_request *r1 = nullptr, *r2 = nullptr;
                    api->slot_create(inst, 0, gran, &g, &gi);
                    api->slot_release(inst, g, vs, &r1);
                    api->request_wait(inst, r1, 10000);
                    api->slot_remap(inst, g, vs, src.base, gi.size, 0, &r2);
                    api->request_wait(inst, r2, 10000);
                    api->request_adopt(inst, r2);
                    api->request_destroy(inst, r1);
                    api->request_destroy(inst, r2);
                    api->slot_close(inst, g);
                });
                rows_out.push_back(paired(row_of("VMM one granule full cycle vs the same raw calls", "us", tg.x * 1e6,
                                                 tg.raw * 1e6, false, "granule"), tg));
                // Where a granule's cycle goes, phase by phase (medians, us).
                {
                    // The raw driver's calls phase by phase beside them, taken in turns (the same
                    // split as raw_granule_slot: reserve+map, unmap, map+copy enqueue, synchronize,
                    // unmap+free), so that the phase where the backend's time goes shows.
                    std::vector<std::vector<double>> ph(5), rp(5);
                    for (int i = 0; i < 30; ++i) {
                        {
                            CUdeviceptr rg;
                            CUmemGenericAllocationHandle gh;
                            double t0 = now_s();
                            CK(d.cuMemAddressReserve(&rg, gran, 0, 0, 0));
                            vmm_map(rg, gran, &gh);
                            double t1 = now_s();
                            vmm_unmap(rg, gran, gh);
                            double t2 = now_s();
                            vmm_map(rg, gran, &gh);
                            CK(d.cuMemcpyHtoDAsync_v2(rg, hpinned, gran, s));
                            double t3 = now_s();
                            CK(d.cuStreamSynchronize(s));
                            double t4 = now_s();
                            vmm_unmap(rg, gran, gh);
                            CK(d.cuMemAddressFree(rg, gran));
                            double t5 = now_s();
                            const double v[5] = {t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4};
                            for (int k = 0; k < 5; ++k) rp[size_t(k)].push_back(v[k] * 1e6);
                        }
                        xmc_slot *g = nullptr; xmc_slot_info gi{}; xmc_request *r1 = nullptr, *r2 = nullptr;
                        double t0 = now_s();
                        api->slot_create(inst, 0, gran, &g, &gi);
                        double t1 = now_s();
                        api->slot_release(inst, g, vs, &r1);
                        api->request_wait(inst, r1, 10000);
                        double t2 = now_s();
                        api->slot_remap(inst, g, vs, src.base, gi.size, 0, &r2);
                        double t3 = now_s();
                        api->request_wait(inst, r2, 10000);
                        double t4 = now_s();
                        api->request_adopt(inst, r2);
                        api->request_destroy(inst, r1);
                        api->request_destroy(inst, r2);
                        api->slot_close(inst, g);
                        double t5 = now_s();
                        const double v[5] = {t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4};
                        for (int k = 0; k < 5; ++k) ph[size_t(k)].push_back(v[k] * 1e6);
                    }
                    auto med = [](std::vector<double> x) { std::sort(x.begin(), x.end()); return x[x.size() / 2]; };
                    std::printf("xmc_gpu_bench: granule cycle phases (us, backend / raw): create %.1f / %.1f, "
                                "release+wait %.1f / %.1f, remap call %.1f / %.1f, remap wait %.1f / %.1f, "
                                "adopt+destroy+close %.1f / %.1f\n",
                                med(ph[0]), med(rp[0]), med(ph[1]), med(rp[1]), med(ph[2]), med(rp[2]), med(ph[3]),
                                med(rp[3]), med(ph[4]), med(rp[4]));
                }
                // The hand-off: a release on an idle stream, from submit to
                // the backend reporting it done (stream point noticed, worker
                // woken, unmap + release), against the raw unmap + release.
                xmc_slot *g = nullptr;
                xmc_slot_info gi{};
                if (api->slot_create(inst, 0, gran, &g, &gi) == XMC_OK) {
                    CUdeviceptr rg;
                    CK(d.cuMemAddressReserve(&rg, gran, 0, 0, 0));
                    const PairedMedians ph = paired_measured(50, [&] { return raw_unmap_at(rg); }, [&] {
                        xmc_request *r1 = nullptr, *r2 = nullptr;
                        const double t0 = now_s();
                        api->slot_release(inst, g, vs, &r1);
                        api->request_wait(inst, r1, 10000);
                        const double dt = now_s() - t0;
                        api->slot_remap(inst, g, vs, src.base, gi.size, XMC_REMAP_DEFER_COPY, &r2);
                        api->request_wait(inst, r2, 10000);
                        api->request_adopt(inst, r2);
                        api->request_destroy(inst, r1);
                        api->request_destroy(inst, r2);
                        return dt;
                    });
                    CK(d.cuMemAddressFree(rg, gran));
                    rows_out.push_back(paired(row_of("VMM release on an idle stream, submit to done", "us", ph.x * 1e6,
                                                     ph.raw * 1e6, false), ph));
                    std::printf("xmc_gpu_bench: stream point to worker hand-off: %.1f us (release %.1f us - raw "
                                "cuMemUnmap+cuMemRelease %.1f us)\n",
                                (ph.x - ph.raw) * 1e6, ph.x * 1e6, ph.raw * 1e6);
                    api->slot_close(inst, g);
                }
            }
        }
        if (vs) api->stream_destroy(inst, vs);
        if (src.base) api->pin_free(inst, src.base);
    } else {
        std::printf("xmc_gpu_bench: backend '%s' does not declare vmm: no slot figures\n", api->name);
    }
    if (peak_peer > 0) rows_out.push_back(row_of("peer copy GPU0 -> GPU1 (raw driver)", "GB/s", peak_peer, peak_peer));
    api->close(inst);

    // ---- the table ----
    std::printf("\n%-44s %14s %14s %7s %13s  %s\n", "path", "xmc", "peak (same run)", "ratio", "pairs' IQR", "target");
    bool below = false, missed = false;
    for (const auto &r : rows_out) {
        char target[64] = "";
        if (r.target > 0) {
            const bool ok = r.ratio() >= r.target;
            missed |= !ok;
            std::snprintf(target, sizeof target, "%s >= %.2f %s", r.requirement.c_str(), r.target, ok ? "ok" : "MISSED");
        }
        char iqr[32] = "";
        if (!r.pairs.empty()) std::snprintf(iqr, sizeof iqr, "%.3f-%.3f", r.quantile(0.25), r.quantile(0.75));
        std::printf("%-44s %9.2f %-4s %9.2f %-4s %7.3f %13s  %s\n", r.path.c_str(), r.figure, r.unit.c_str(), r.peak,
                    r.unit.c_str(), r.ratio(), iqr, target);
        if (min_ratio > 0 && r.ratio() < min_ratio) below = true;
    }
    std::printf("peaks: raw driver calls in this run (cuMemHostAlloc H2D %.1f GB/s, D2H %.1f, pageable H2D %.1f, "
                "D2D %.1f, 2-D 8 KiB rows %.1f, registered H2D %.1f, cuMemHostRegister+Unregister %s %.1f ms, "
                "callback %.1f us, VMM granule reserve..free %.1f us, slot granule cycle %.1f us, "
                "release+remap+reload %.2f ms%s)\n",
                peak_h2d, peak_d2h, peak_pageable, peak_d2d, peak_2d, peak_reg_h2d, human(bytes).c_str(), t_reg * 1e3,
                t_cb * 1e6, t_granule * 1e6, t_raw_granule_slot * 1e6, t_raw_reload_cycle * 1e3, peak_peer > 0 ? (", peer " + std::to_string(peak_peer) + " GB/s").c_str() : "");
    std::printf("data check (bytes arrived through pinned memory): %s\n", data_ok ? "ok" : "FAILED");
    if (!json_path.empty()) {
        std::ofstream js(json_path);
        js << "{\"device\":\"" << name << "\",\"devices\":" << ndev << ",\"driver\":" << drv_version
           << ",\"bytes\":" << bytes << ",\"peaks\":{\"h2d\":" << peak_h2d << ",\"d2h\":" << peak_d2h
           << ",\"d2d_copy\":" << peak_d2d / 2 << ",\"pageable_h2d\":" << peak_pageable << "},\"rows\":[";
        for (size_t i = 0; i < rows_out.size(); ++i) {
            js << (i ? "," : "") << "{\"path\":\"" << rows_out[i].path << "\",\"unit\":\"" << rows_out[i].unit
               << "\",\"figure\":" << rows_out[i].figure << ",\"peak\":" << rows_out[i].peak
               << ",\"ratio\":" << rows_out[i].ratio() << ",\"requirement\":\"" << rows_out[i].requirement
               << "\",\"target\":" << rows_out[i].target;
            if (!rows_out[i].pairs.empty())  // xmc bench judges the median ratio with its spread
                js << ",\"samples\":" << rows_out[i].pairs.size() << ",\"ratio_lo\":" << rows_out[i].quantile(0.25)
                   << ",\"ratio_hi\":" << rows_out[i].quantile(0.75) << ",\"ratio_min\":" << rows_out[i].quantile(0)
                   << ",\"ratio_max\":" << rows_out[i].quantile(1);
            if (!rows_out[i].pairs.empty()) {  // every pair: xmc bench judges the median's interval from them
                js << ",\"pairs\":[";
                for (size_t k = 0; k < rows_out[i].pairs.size(); ++k) js << (k ? "," : "") << rows_out[i].pairs[k];
                js << "]";
            }
            js << "}";
        }
        js << "]}\n";
    }
    release_buffers();
    if (below) std::printf("xmc_gpu_bench: a figure is below --min-ratio %.2f\n", min_ratio);
    // REG-SPEED, VMM-SPEED: a missed target ratio fails the run with --check-targets.
    if (missed) std::printf("xmc_gpu_bench: a requirement's target was missed%s\n", check_targets ? "" : " (reported; --check-targets makes it fail)");
    return (below || (check_targets && missed) || !data_ok) ? 1 : 0;
}
