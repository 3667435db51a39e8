// Validation of a strided copy descriptor (COPY-STRIDED), shared by every
// in-tree backend so that all of them refuse exactly the same descriptors.
// Header-only: the host and CUDA backends are separate libraries.
//
// The rules (xmc/backend.h, xmc_copy_desc), all checked before anything is
// enqueued, each failure XMC_ERR_INVALID_ARGUMENT unless said otherwise:
//   - the descriptor is not NULL; width, height and depth are not 0;
//   - each side: ptr not NULL; kind is one of xmc_mem_kind; DEVICE memory
//     names a device in [0, device_count) (else XMC_ERR_NO_DEVICE);
//     pitch >= x_bytes + width_bytes; slice_pitch >= pitch * (y + height);
//     the last described byte, ptr + (z+depth-1)*slice_pitch +
//     (y+height-1)*pitch + x_bytes + width_bytes - 1, does not overflow;
//   - the byte spans [first, last] of the two sides do not overlap (memcpy
//     and the driver's copies are undefined on overlap).
// Pitches are checked whatever the shape (also for 1-D copies) so that one
// rule holds everywhere.
#pragma once
#include "errors.hpp"

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace xmc::be {

struct CopySpan {
    uintptr_t first = 0;  // address of the first described byte
    uintptr_t last = 0;   // address of the last described byte
};

// a * b + c without overflow; false when it would overflow.
inline bool mul_add(size_t a, size_t b, size_t c, size_t *out) {
    size_t m = 0;
    if (__builtin_mul_overflow(a, b, &m)) return false;
    return !__builtin_add_overflow(m, c, out);
}

inline xmc_status check_copy_side(xmc_instance *inst, const xmc_copy_desc &d, const xmc_copy_side &s,
                                  const char *side, int32_t device_count, CopySpan *span) {
    if (!s.ptr) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "copy", "copy: %s pointer is NULL", side);
    // Read as an integer: a C caller may store any value in the enum field,
    // and loading an out-of-range value as the C++ enum is undefined.
    std::underlying_type_t<xmc_mem_kind> kind = 0;
    std::memcpy(&kind, &s.kind, sizeof kind);
    if (kind != XMC_MEM_HOST && kind != XMC_MEM_PINNED && kind != XMC_MEM_REGISTERED && kind != XMC_MEM_DEVICE)
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "copy", "copy: %s memory kind %lld is not an xmc_mem_kind",
                    side, static_cast<long long>(kind));
    if (s.kind == XMC_MEM_DEVICE && (s.device < 0 || s.device >= device_count))
        return fail(inst, XMC_ERR_NO_DEVICE, 0, "copy", "copy: %s device %d does not exist (%d device(s))", side,
                    s.device, device_count);
    size_t row_end = 0;
    if (__builtin_add_overflow(s.x_bytes, d.width_bytes, &row_end))
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "copy", "copy: %s x_bytes + width_bytes overflows", side);
    // COPY-STRIDED: pitches that hold the described rows and slices.
    if (s.pitch < row_end)
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "copy",
                    "copy: %s pitch %zu < x_bytes %zu + width_bytes %zu", side, s.pitch, s.x_bytes, d.width_bytes);
    size_t rows = 0, slice_need = 0;
    if (__builtin_add_overflow(s.y, d.height, &rows) || !mul_add(s.pitch, rows, 0, &slice_need))
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "copy", "copy: %s pitch * (y + height) overflows", side);
    if (s.slice_pitch < slice_need)
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "copy",
                    "copy: %s slice_pitch %zu < pitch %zu * (y %zu + height %zu)", side, s.slice_pitch, s.pitch,
                    s.y, d.height);
    // Offsets of the first and last described bytes from ptr.
    size_t first = 0, last = 0, last_z = 0, last_y = 0;
    bool ok = mul_add(s.z, s.slice_pitch, 0, &first) && mul_add(s.y, s.pitch, first, &first) &&
              !__builtin_add_overflow(first, s.x_bytes, &first) &&
              !__builtin_add_overflow(s.z, d.depth - 1, &last_z) && !__builtin_add_overflow(s.y, d.height - 1, &last_y) &&
              mul_add(last_z, s.slice_pitch, 0, &last) && mul_add(last_y, s.pitch, last, &last) &&
              !__builtin_add_overflow(last, row_end - 1, &last);
    const auto p = reinterpret_cast<uintptr_t>(s.ptr);
    if (!ok || p > UINTPTR_MAX - last)
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "copy",
                    "copy: %s extent overflows the address space (ptr %p)", side, s.ptr);
    span->first = p + first;
    span->last = p + last;
    return XMC_OK;
}

// XMC_OK when the descriptor may be enqueued; otherwise the refusal, recorded.
// With `spans`, the described bytes of the source and destination (spans[0], spans[1]).
inline xmc_status check_copy(xmc_instance *inst, const xmc_copy_desc *d, int32_t device_count,
                             CopySpan *spans = nullptr) {
    if (!d) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "copy", "copy: descriptor is NULL");
    // COPY-STRIDED: every refusal comes before anything is enqueued.
    if (d->width_bytes == 0 || d->height == 0 || d->depth == 0)
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "copy",
                    "copy: zero extent (width_bytes %zu, height %zu, depth %zu)", d->width_bytes, d->height,
                    d->depth);
    CopySpan src, dst;
    if (xmc_status st = check_copy_side(inst, *d, d->src, "source", device_count, &src); st != XMC_OK) return st;
    if (xmc_status st = check_copy_side(inst, *d, d->dst, "destination", device_count, &dst); st != XMC_OK)
        return st;
    // COPY-STRIDED: overlapping sides are refused (copies are undefined there).
    if (src.first <= dst.last && dst.first <= src.last)
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "copy",
                    "copy: source bytes [%p, %p] and destination bytes [%p, %p] overlap",
                    reinterpret_cast<void *>(src.first), reinterpret_cast<void *>(src.last),
                    reinterpret_cast<void *>(dst.first), reinterpret_cast<void *>(dst.last));
    if (spans) {
        spans[0] = src;
        spans[1] = dst;
    }
    return XMC_OK;
}

} // namespace xmc::be
