// Tests of the fake CUDA driver (test_fake_cuda.cpp says how the four files divide them): streams,
// events, host functions and copies.
#include "test_fake_cuda.hpp"

namespace {
using namespace fake_cuda_test;

// ---- streams, events, host functions -------------------------------------------------------------

struct CallbackProbe {
    Api* a = nullptr;
    CUstream other = nullptr;
    CUevent ev = nullptr;
    CUresult alloc = CUDA_SUCCESS, record = CUDA_SUCCESS, query = CUDA_SUCCESS, current = CUDA_SUCCESS,
             name = CUDA_ERROR_UNKNOWN;
    std::thread::id thread;
};

void CUDA_CB callback_calls_driver(void* u) {
    auto* p = static_cast<CallbackProbe*>(u);
    CUdeviceptr d = 0;
    CUcontext c = nullptr;
    const char* s = nullptr;
    p->alloc = p->a->cuMemAlloc(&d, 4096);
    p->record = p->a->cuEventRecord(p->ev, p->other);
    p->query = p->a->cuStreamQuery(p->other);
    p->current = p->a->cuCtxGetCurrent(&c);
    p->name = p->a->cuGetErrorName(CUDA_ERROR_NOT_PERMITTED, &s);
    p->thread = std::this_thread::get_id();
}

// Two streams and an event, and the probe of a host function that calls the driver on them.
struct CallbackRig {
    CUstream s = nullptr, other = nullptr;
    CUevent ev = nullptr;
    CallbackProbe p;
};
void make_rig(Api& a, CallbackRig& r) {
    ASSERT_EQ(a.cuStreamCreate(&r.s, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamCreate(&r.other, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&r.ev, 0), CUDA_SUCCESS);
    r.p.a = &a;
    r.p.other = r.other;
    r.p.ev = r.ev;
}
// The host function, on stream s, run to its end.
void run_rig(Api& a, CallbackRig& r) {
    ASSERT_EQ(a.cuLaunchHostFunc(r.s, callback_calls_driver, &r.p), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(r.s), CUDA_SUCCESS);
}
void destroy_rig(Api& a, CallbackRig& r) {
    EXPECT_EQ(a.cuEventDestroy(r.ev), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(r.other), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(r.s), CUDA_SUCCESS);
}

TEST_F(FakeCuda, DriverCallsFromAHostCallbackAreRefused) {
    retain(0);
    CallbackRig r;
    ASSERT_NO_FATAL_FAILURE(make_rig(a, r));
    ASSERT_NO_FATAL_FAILURE(run_rig(a, r));
    EXPECT_EQ(r.p.alloc, CUDA_ERROR_NOT_PERMITTED);
    EXPECT_EQ(r.p.record, CUDA_ERROR_NOT_PERMITTED);
    EXPECT_EQ(r.p.query, CUDA_ERROR_NOT_PERMITTED);
    EXPECT_EQ(r.p.current, CUDA_ERROR_NOT_PERMITTED);
    EXPECT_EQ(r.p.name, CUDA_SUCCESS);  // pure lookups are allowed
    EXPECT_NE(r.p.thread, std::this_thread::get_id());
    EXPECT_GE(a.call_count("cuMemAlloc_v2"), 1u);
    destroy_rig(a, r);
    release(0);
}

// Every call is recorded with its thread: a test of the thread that calls the driver
// (VMM-CALLBACK) reads this record, and learns a callback thread from a callback of its own.
TEST_F(FakeCuda, EveryCallIsRecordedWithItsThreadAndWhetherInsideAHostFunction) {
    retain(0);
    CallbackRig r;
    ASSERT_NO_FATAL_FAILURE(make_rig(a, r));
    a.reset_call_records();
    ASSERT_NO_FATAL_FAILURE(run_rig(a, r));
    std::vector<xmc_fake_cuda_call_record> recs(64);
    const size_t n = a.call_records(recs.data(), recs.size());
    ASSERT_GE(n, 6u);
    ASSERT_LE(n, recs.size());
    recs.resize(n);
    const int64_t me = static_cast<int64_t>(gettid());
    EXPECT_STREQ(recs[0].entry, "cuLaunchHostFunc");
    EXPECT_EQ(recs[0].tid, me);
    EXPECT_EQ(recs[0].in_host_callback, 0);
    EXPECT_EQ(recs[0].on_callback_thread, 0);
    // The five calls of the host function (refused or not): inside it, on the callback thread.
    std::vector<std::string> inside;
    int64_t cb = 0;
    for (const auto& rec : recs)
        if (rec.in_host_callback) {
            inside.push_back(rec.entry);
            EXPECT_EQ(rec.on_callback_thread, 1);
            EXPECT_NE(rec.tid, me);
            cb = rec.tid;
        }
    EXPECT_EQ(inside, (std::vector<std::string>{"cuMemAlloc", "cuEventRecord", "cuStreamQuery", "cuCtxGetCurrent",
                                                "cuGetErrorName"}));
    EXPECT_NE(cb, 0);
    // Only the records since the reset are kept, and the count says how many calls there were.
    a.reset_call_records();
    EXPECT_EQ(a.call_records(nullptr, 0), 0u);
    EXPECT_EQ(a.cuStreamQuery(r.s), CUDA_SUCCESS);
    EXPECT_EQ(a.call_records(nullptr, 0), 1u);
    destroy_rig(a, r);
    release(0);
}

struct Gate {
    std::promise<void> open;
    std::shared_future<void> opened = open.get_future().share();
};

struct LogStep {
    std::vector<int>* log;
    int id;
};

void CUDA_CB wait_gate(void* u) { static_cast<Gate*>(u)->opened.wait(); }
void CUDA_CB log_id(void* u) {
    auto* g = static_cast<LogStep*>(u);
    g->log->push_back(g->id);
}

TEST_F(FakeCuda, StreamsRunInOrderAndEventsOrderAcrossStreams) {
    retain(0);
    CUstream s1 = nullptr, s2 = nullptr;
    CUevent e = nullptr, never = nullptr, t0 = nullptr, t1 = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&never, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&t0, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&t1, 0), CUDA_SUCCESS);
    std::vector<int> log;  // written only by the stream workers, in an order the events fix
    Gate gate;
    LogStep a1{&log, 1}, a2{&log, 2}, b1{&log, 3};
    CUdeviceptr buf = 0;
    ASSERT_EQ(a.cuMemAlloc(&buf, 256), CUDA_SUCCESS);
    // dst is registered: into pageable memory the copy would return only when
    // done, so the call itself would wait for the gate (as on the real driver).
    std::vector<unsigned char> src(256, 0x11);
    Pages dst_pages(1);
    ASSERT_EQ(a.cuMemHostRegister(dst_pages.p, dst_pages.bytes, 0), CUDA_SUCCESS);
    auto* dst = reinterpret_cast<unsigned char*>(dst_pages.p);

    ASSERT_EQ(a.cuEventRecord(t0, s1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuLaunchHostFunc(s1, wait_gate, &gate), CUDA_SUCCESS);
    ASSERT_EQ(a.cuLaunchHostFunc(s1, log_id, &a1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemcpyHtoDAsync(buf, src.data(), src.size(), s1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuLaunchHostFunc(s1, log_id, &a2), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventRecord(e, s1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventRecord(t1, s1), CUDA_SUCCESS);
    // A wait on a never-recorded event is no wait; the one on e is.
    ASSERT_EQ(a.cuStreamWaitEvent(s2, never, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamWaitEvent(s2, e, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuLaunchHostFunc(s2, log_id, &b1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemcpyDtoHAsync(dst, buf, src.size(), s2), CUDA_SUCCESS);

    // t0 is before the gate: once it completed, the gate holds t1 for 20 ms
    // at least, however late a loaded machine ran s1's worker.
    ASSERT_EQ(a.cuEventSynchronize(t0), CUDA_SUCCESS);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(a.cuStreamQuery(s1), CUDA_ERROR_NOT_READY);
    EXPECT_EQ(a.cuStreamQuery(s2), CUDA_ERROR_NOT_READY);
    EXPECT_EQ(a.cuEventQuery(e), CUDA_ERROR_NOT_READY);
    EXPECT_EQ(a.cuEventQuery(never), CUDA_SUCCESS);
    float ms = 0;
    EXPECT_EQ(a.cuEventElapsedTime(&ms, t0, t1), CUDA_ERROR_NOT_READY);
    gate.open.set_value();
    ASSERT_EQ(a.cuStreamSynchronize(s2), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventSynchronize(t1), CUDA_SUCCESS);
    EXPECT_EQ(log, (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(std::vector<unsigned char>(dst, dst + src.size()), src);
    EXPECT_EQ(a.cuMemHostUnregister(dst_pages.p), CUDA_SUCCESS);
    EXPECT_EQ(a.cuEventQuery(e), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventElapsedTime(&ms, t0, t1), CUDA_SUCCESS);
    EXPECT_GE(ms, 15.0f);
    EXPECT_EQ(a.cuEventElapsedTime(&ms, t0, never), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(a.cuEventElapsedTime(&ms, e, t1), CUDA_ERROR_INVALID_HANDLE);  // DISABLE_TIMING

    for (CUevent x : {e, never, t0, t1}) EXPECT_EQ(a.cuEventDestroy(x), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s1), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s2), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s2), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(a.cuMemFree(buf), CUDA_SUCCESS);
    release(0);
}

// As on the real driver (H200, driver 580): host functions of all streams
// run on one thread, one at a time; a blocked one holds the others' host
// functions, but not their copies and records.
TEST_F(FakeCuda, HostFunctionsOfAllStreamsRunOneAtATimeOnOneThread) {
    retain(0);
    CUstream s1 = nullptr, s2 = nullptr;
    CUevent e = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s1, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamCreate(&s2, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    std::vector<int> log;
    struct Held {
        std::promise<void> started;
        Gate gate;
    } held;
    LogStep b1{&log, 1};
    auto hold = [](void* u) {
        auto* h = static_cast<Held*>(u);
        h->started.set_value();
        h->gate.opened.wait();
    };
    Gate& gate = held.gate;
    ASSERT_EQ(a.cuLaunchHostFunc(s1, hold, &held), CUDA_SUCCESS);
    held.started.get_future().wait();  // the callback thread is in it now
    ASSERT_EQ(a.cuEventRecord(e, s2), CUDA_SUCCESS);
    ASSERT_EQ(a.cuLaunchHostFunc(s2, log_id, &b1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventSynchronize(e), CUDA_SUCCESS);  // s2's record is not held
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(a.cuStreamQuery(s2), CUDA_ERROR_NOT_READY) << "s2's host function ran beside a blocked one";
    EXPECT_TRUE(log.empty());
    gate.open.set_value();
    ASSERT_EQ(a.cuStreamSynchronize(s2), CUDA_SUCCESS);
    EXPECT_EQ(log, std::vector<int>{1});
    EXPECT_EQ(a.cuEventDestroy(e), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s1), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s2), CUDA_SUCCESS);
    release(0);
}

// cuStreamWaitValue32 on registered host memory holds the stream until a
// plain host store satisfies it; cuStreamWriteValue32 stores in stream order;
// unregistered host memory and misaligned words are refused.
TEST_F(FakeCuda, StreamWaitValueHoldsTheStreamUntilTheHostWordIsSet) {
    retain(0);
    Pages host(1);
    ASSERT_EQ(a.cuMemHostRegister(host.p, host.bytes, CU_MEMHOSTREGISTER_DEVICEMAP), CUDA_SUCCESS);
    CUdeviceptr word = 0;
    ASSERT_EQ(a.cuMemHostGetDevicePointer(&word, host.p, 0), CUDA_SUCCESS);
    auto* w = reinterpret_cast<volatile uint32_t*>(host.p);
    *w = 0;
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    Pages plain(1);
    EXPECT_EQ(a.cuStreamWaitValue32(s, reinterpret_cast<CUdeviceptr>(plain.p), 1, CU_STREAM_WAIT_VALUE_GEQ),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuStreamWaitValue32(s, word + 2, 1, CU_STREAM_WAIT_VALUE_GEQ), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuStreamWaitValue32(s, word, 1, 7), CUDA_ERROR_INVALID_VALUE);
    ASSERT_EQ(a.cuStreamWaitValue32(s, word, 2, CU_STREAM_WAIT_VALUE_GEQ), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamWriteValue32(s, word + 4, 9, CU_STREAM_WRITE_VALUE_DEFAULT), CUDA_SUCCESS);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(a.cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    *w = 1;  // not yet: 1 < 2
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(a.cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    EXPECT_EQ(w[1], 0u) << "the write ran before the wait it follows";
    *w = 2;
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT_EQ(w[1], 9u);
    ASSERT_EQ(a.cuStreamWaitValue32(s, word, 2, CU_STREAM_WAIT_VALUE_EQ), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT_EQ(a.set_faults("fail:cuStreamWaitValue32:CUDA_ERROR_NOT_SUPPORTED@1"), 0) << last_error();
    EXPECT_EQ(a.cuStreamWaitValue32(s, word, 0, CU_STREAM_WAIT_VALUE_GEQ), CUDA_ERROR_NOT_SUPPORTED);
    EXPECT_EQ(a.set_faults(""), 0);
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemHostUnregister(host.p), CUDA_SUCCESS);
    release(0);
}

// As on the real driver (H200, driver 580): a copy from device memory into
// pageable host memory returns only once it is done, so on a stream held by a
// blocking host function the call itself waits for the function; into
// registered memory it returns at once.
TEST_F(FakeCuda, ACopyIntoPageableMemoryReturnsOnlyWhenDone) {
    retain(0);
    CUdeviceptr dev = 0;
    ASSERT_EQ(a.cuMemAlloc(&dev, 4096), CUDA_SUCCESS);
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemsetD8Async(dev, 0x5a, 4096, s), CUDA_SUCCESS);
    Pages reg(1), plain(1);
    ASSERT_EQ(a.cuMemHostRegister(reg.p, reg.bytes, 0), CUDA_SUCCESS);
    Gate gate;
    ASSERT_EQ(a.cuLaunchHostFunc(s, wait_gate, &gate), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemcpyDtoHAsync(reg.p, dev, 4096, s), CUDA_SUCCESS);  // registered: returns at once
    std::atomic<bool> returned{false};
    std::thread t([&] {
        EXPECT_EQ(a.cuMemcpyDtoHAsync(plain.p, dev, 4096, s), CUDA_SUCCESS);
        returned = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(returned.load()) << "a copy into pageable memory returned before the held stream ran it";
    gate.open.set_value();
    t.join();
    EXPECT_EQ(reinterpret_cast<unsigned char*>(plain.p)[4095], 0x5a) << "returned, but the bytes are not there";
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemHostUnregister(reg.p), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree(dev), CUDA_SUCCESS);
    release(0);
}

TEST_F(FakeCuda, AWaitToldBeforeTheRecordDoesNotWait) {
    // VMM-EVENT-WAIT: the wait captures what was recorded at the time of the call.
    retain(0);
    CUstream s1 = nullptr, s2 = nullptr;
    CUevent e = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s1, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamCreate(&s2, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&e, 0), CUDA_SUCCESS);
    Gate gate;
    ASSERT_EQ(a.cuStreamWaitEvent(s2, e, 0), CUDA_SUCCESS);  // before any record
    ASSERT_EQ(a.cuLaunchHostFunc(s1, wait_gate, &gate), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventRecord(e, s1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(s2), CUDA_SUCCESS);  // returns although s1 is blocked
    EXPECT_EQ(a.cuEventQuery(e), CUDA_ERROR_NOT_READY);
    gate.open.set_value();
    ASSERT_EQ(a.cuEventSynchronize(e), CUDA_SUCCESS);
    EXPECT_EQ(a.cuEventDestroy(e), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s1), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s2), CUDA_SUCCESS);
    release(0);
}

// ---- copies ---------------------------------------------------------------------------------------------

TEST_F(FakeCuda, Copy2DHonoursPitchesAndOffsetsExactly) {
    retain(0);
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    const size_t spitch = 40, dpitch = 64, W = 13, H = 5, sx = 3, sy = 2, dx = 7, dy = 1;
    std::vector<unsigned char> host(spitch * 10);
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(i * 7 + 1);
    CUdeviceptr dev = 0;
    ASSERT_EQ(a.cuMemAlloc(&dev, dpitch * 8), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemsetD8Async(dev, 0xee, dpitch * 8, s), CUDA_SUCCESS);
    CUDA_MEMCPY2D c;
    std::memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = host.data();
    c.srcPitch = spitch;
    c.srcXInBytes = sx;
    c.srcY = sy;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dev;
    c.dstPitch = dpitch;
    c.dstXInBytes = dx;
    c.dstY = dy;
    c.WidthInBytes = W;
    c.Height = H;
    ASSERT_EQ(a.cuMemcpy2DAsync(&c, s), CUDA_SUCCESS);
    std::vector<unsigned char> back(dpitch * 8);
    ASSERT_EQ(a.cuMemcpyDtoHAsync(back.data(), dev, back.size(), s), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    for (size_t y = 0; y < 8; ++y)
        for (size_t x = 0; x < dpitch; ++x) {
            bool inside = y >= dy && y < dy + H && x >= dx && x < dx + W;
            unsigned char want = inside ? host[(y - dy + sy) * spitch + (x - dx + sx)] : 0xee;
            ASSERT_EQ(back[y * dpitch + x], want) << "x " << x << " y " << y;
        }
    c.srcPitch = W - 1;  // recorded: a pitch below the width is invalid
    EXPECT_EQ(a.cuMemcpy2DAsync(&c, s), CUDA_ERROR_INVALID_VALUE);
    c.srcPitch = spitch;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    EXPECT_EQ(a.cuMemcpy2DAsync(&c, s), CUDA_ERROR_INVALID_VALUE);  // recorded: a NULL array
    c.dstArray = reinterpret_cast<CUarray>(0x1000);
    EXPECT_EQ(a.cuMemcpy2DAsync(&c, s), CUDA_ERROR_NOT_SUPPORTED);  // arrays are not modelled
    EXPECT_EQ(a.cuMemFree(dev), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    release(0);
}

TEST_F(FakeCuda, Copy3DHonoursPitchesHeightsAndOffsetsExactly) {
    retain(0);
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    // device source volume: pitch 32, height 6, depth 4; host destination: pitch 24, height 5, depth 5
    const size_t sp = 32, sh = 6, sd = 4, dp = 24, dh = 5, dd = 5;
    const size_t W = 9, H = 3, D = 2, sx = 4, sy = 2, sz = 1, dx = 10, dy = 1, dz = 2;
    CUdeviceptr dev = 0;
    ASSERT_EQ(a.cuMemAlloc(&dev, sp * sh * sd), CUDA_SUCCESS);
    std::vector<unsigned char> init(sp * sh * sd);
    for (size_t i = 0; i < init.size(); ++i) init[i] = static_cast<unsigned char>(i * 13 + 5);
    ASSERT_EQ(a.cuMemcpyHtoDAsync(dev, init.data(), init.size(), s), CUDA_SUCCESS);
    std::vector<unsigned char> host(dp * dh * dd, 0xcd);
    CUDA_MEMCPY3D c;
    std::memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = dev;
    c.srcPitch = sp;
    c.srcHeight = sh;
    c.srcXInBytes = sx;
    c.srcY = sy;
    c.srcZ = sz;
    c.dstMemoryType = CU_MEMORYTYPE_HOST;
    c.dstHost = host.data();
    c.dstPitch = dp;
    c.dstHeight = dh;
    c.dstXInBytes = dx;
    c.dstY = dy;
    c.dstZ = dz;
    c.WidthInBytes = W;
    c.Height = H;
    c.Depth = D;
    ASSERT_EQ(a.cuMemcpy3DAsync(&c, s), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    for (size_t z = 0; z < dd; ++z)
        for (size_t y = 0; y < dh; ++y)
            for (size_t x = 0; x < dp; ++x) {
                bool inside = z >= dz && z < dz + D && y >= dy && y < dy + H && x >= dx && x < dx + W;
                unsigned char want = 0xcd;
                if (inside)
                    want = init[((z - dz + sz) * sh + (y - dy + sy)) * sp + (x - dx + sx)];
                ASSERT_EQ(host[(z * dh + y) * dp + x], want) << x << "," << y << "," << z;
            }
    c.srcHeight = H - 1;  // slices overlapping rows: invalid
    EXPECT_EQ(a.cuMemcpy3DAsync(&c, s), CUDA_ERROR_INVALID_VALUE);
    c.srcHeight = sh;
    c.srcDevice = dev + sp * sh * sd - 8;  // runs past the allocation
    EXPECT_EQ(a.cuMemcpy3DAsync(&c, s), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemFree(dev), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    release(0);
}

TEST_F(FakeCuda, CopiesCheckTheDeviceSide) {
    retain(0);
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    Pages host(2);
    std::vector<char> src(4096, 1);
    // recorded: a pageable host pointer as the device side is invalid
    EXPECT_EQ(a.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(host.p), src.data(), src.size(), s),
              CUDA_ERROR_INVALID_VALUE);
    // registered memory is device-accessible
    ASSERT_EQ(a.cuMemHostRegister(host.p, host.bytes, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(host.p), src.data(), src.size(), s), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT_EQ(host.p[4095], 1);
    EXPECT_EQ(a.cuMemHostUnregister(host.p), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    release(0);
}

TEST_F(FakeCuda, CopiesKnowTheExtentOfDeviceMemoryAlsoOnceItIsFreed) {
    // recorded: one byte past an allocation is refused, by unified address too
    // (copy_1d_past_end); freed device memory stays device memory, so a copy
    // from it is refused instead of reading an unmapped page as host memory
    retain(0);
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CUdeviceptr p = 0, q = 0, gone = 0;
    ASSERT_EQ(a.cuMemAlloc(&p, 6144), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemAlloc(&q, 6144), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemcpyAsync(q, p, 6145, s), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemcpyAsync(q + 6144, p, 16, s), CUDA_ERROR_INVALID_VALUE);  // past the end, in its last page
    EXPECT_EQ(a.cuMemcpyAsync(q, p, 6144, s), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemAlloc(&gone, 1 << 16), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemFree(gone), CUDA_SUCCESS);
    std::vector<char> host(4096, 3);
    EXPECT_EQ(a.cuMemcpyAsync(q, gone, 4096, s), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemcpyAsync(gone, p, 4096, s), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(host.data()), gone + 4096, 4096, s),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemcpyDtoHAsync(host.data(), gone, host.size(), s), CUDA_ERROR_INVALID_VALUE);
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT_EQ(touch_in_child(gone), SIGSEGV);  // and the host cannot touch it
    // the next allocation that fits reuses the freed range (freed ranges do not pile up)
    CUdeviceptr again = 0;
    ASSERT_EQ(a.cuMemAlloc(&again, 1 << 16), CUDA_SUCCESS);
    EXPECT_EQ(again, gone);
    EXPECT_EQ(a.cuMemcpyAsync(again, reinterpret_cast<CUdeviceptr>(host.data()), 4096, s), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT_EQ(reinterpret_cast<char*>(again)[4095], 3);
    for (CUdeviceptr x : {p, q, again}) EXPECT_EQ(a.cuMemFree(x), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    release(0);
}

}  // namespace
