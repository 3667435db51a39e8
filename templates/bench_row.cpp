// TEMPLATE: a hardware benchmark row of hardware/gpu_bench.cpp (xmc_gpu_bench; between GPUs:
// hardware/gpu_transfer_bench.cpp). A row is the backend's figure, through the xmc ABI, beside
// the same work done by the raw driver in the same run (its peak), and their ratio (SPEC 10):
// 1.0 is the peak, higher is better whichever the unit. Three parts; not built.

// ---- 1. the raw driver call, if struct Driver (hardware/gpu_bench.hpp) lacks it -------------
    XMC_CU(cuNEW_RAW_CALL, void *, size_t)  // the member, in struct Driver's list
    XMC_SYM(cuNEW_RAW_CALL)                 // in load(); the exact exported symbol (_v2 ...)
// TEMPLATE: load() fails, and the run skips as if there were no GPU, when a symbol is missing:
// one the fake CUDA driver does not export (the PR test bench.gpu_bench_on_fake runs this
// benchmark on it) is looked up with dlsym alone and may stay null, as cuMemHostAlloc is.

// ---- 2. a target, only if the row checks a requirement's ratio (kTargets) -------------------
    {"TARGET_KEY", "XXX-NEW-ID", 0.95, 16 * kMiB, 1024 * kMiB},  // TEMPLATE: what against what

// ---- 3. the row, in main(), in the block of the capability it needs --------------------------
    // XXX-NEW-ID: WHAT IS MEASURED, against WHICH raw calls (the same work, not a smaller one).
    if (api->capabilities & XMC_CAP_SOMETHING) {
        // Raw and backend taken in turns (paired_time), so both see the GPU and host in one state.
        const PairedMedians m = paired_time(9, [&] {
            CK(d.cuNEW_RAW_CALL(BUFFER, bytes));  // the peak: the raw driver
            CK(d.cuStreamSynchronize(s));
        }, [&] {
            if (api->NEW_ENTRY(inst, BUFFER, bytes) != XMC_OK) std::exit(1);  // the backend, through the ABI
        });
        // A bandwidth: figure and peak in GB/s, higher is better. paired() keeps the per-pair
        // ratios: xmc bench judges the row on their median, with their quartiles as its spread.
        rows_out.push_back(paired(row_of("WHAT IT MEASURES", "GB/s", gb / m.x, gb / m.raw, true, "TARGET_KEY"), m));
        // A time: paired(row_of("WHAT IT MEASURES", "us", m.x * 1e6, m.raw * 1e6, false), m)  (or "ms")
    }

// TEMPLATE: then, on a GPU machine, `xmc bench --backend cuda --sizes 16M,64M,256M,1G --json bench.json`
// (conformance/runner/bench.cpp) runs xmc_gpu_bench once per size and reports each row beside its
// same-run peak as a ratio: "broken" with a median above 1.05 (kBrokenAbove: beating the peak by more
// than noise means one of the two measured something else), "missed" below its target beyond the
// pairs' spread (or without a ratio), "noisy" where the spread straddles the target (rerun).
// A path that ends in a size ("register+unregister 4 KiB") gives the row that size, else the run's;
// a baseline matches rows by series (the path without its size), size and unit. Check the run in
// under hardware/results/<gpu>-driver<version>-<what>/ with a README.md saying how it was run, and
// re-record the baseline (hardware/baselines/README.md: --make-baseline of 5 runs) so that it holds the row.
