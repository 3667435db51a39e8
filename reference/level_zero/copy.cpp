// Strided copies through Level Zero (capability `copy`, COPY-STRIDED). The
// descriptor is checked whole first with the rules every in-tree backend
// shares (copy_desc.hpp), then mapped onto the stream's immediate list:
//   - height 1 and depth 1: zeCommandListAppendMemoryCopy of the row;
//   - depth 1: zeCommandListAppendMemoryCopyRegion, 2-D (region depth 0),
//     from the first slice's address (z * slice_pitch added to each side);
//   - depth > 1: zeCommandListAppendMemoryCopyRegion, 3-D, origins and
//     pitches as given (Level Zero counts slice pitches in bytes);
//   - a region field that does not fit the driver's 32 bits: one
//     zeCommandListAppendMemoryCopy per row, in order.
// Host, pinned, registered and device memory are all plain pointers to the
// driver (unified addressing); the kinds only matter for the checks.
#include "ze.hpp"

namespace xmc::ze {
namespace {

bool fits32(size_t v) { return v <= UINT32_MAX; }

bool region_fits(const xmc_copy_desc &c) {
    for (const xmc_copy_side *s : {&c.src, &c.dst})
        if (!fits32(s->x_bytes) || !fits32(s->y) || !fits32(s->z) || !fits32(s->pitch) || !fits32(s->slice_pitch))
            return false;
    return fits32(c.width_bytes) && fits32(c.height) && fits32(c.depth);
}

// Address of byte (x, y, z) of the described region of one side.
char *at(const xmc_copy_side &s, size_t x, size_t y, size_t z) {
    return static_cast<char *>(s.ptr) + (s.z + z) * s.slice_pitch + (s.y + y) * s.pitch + s.x_bytes + x;
}

ze_copy_region_t region(const xmc_copy_side &s, const xmc_copy_desc &c, bool three_d) {
    return ze_copy_region_t{static_cast<uint32_t>(s.x_bytes), static_cast<uint32_t>(s.y),
                            three_d ? static_cast<uint32_t>(s.z) : 0u, static_cast<uint32_t>(c.width_bytes),
                            static_cast<uint32_t>(c.height), three_d ? static_cast<uint32_t>(c.depth) : 0u};
}

} // namespace

// The copy step of the Level Zero StreamOps: the descriptor, the stream and the slots are checked
// (reference/common/streams.hpp).
xmc_status enqueue_copy(xmc_instance *inst, const xmc_copy_desc &c, xmc_stream *handle) {
    Driver &d = Driver::get();
    std::shared_ptr<Stream> s = find_stream(inst, handle);
    if (!s) return be::bad_stream(inst, "copy", handle);
    std::lock_guard<std::mutex> lock(s->append_mu);
    // GRAPH-CAPTURE: into the graph's list while the stream captures; a graph's
    // copies read and write these addresses each launch (VMM-GRAPH).
    ze_command_list_handle_t list = append_target(*s);
    ze_result_t r = ZE_RESULT_SUCCESS;
    const char *what = "zeCommandListAppendMemoryCopy";
    if (c.height == 1 && c.depth == 1) {
        r = d.zeCommandListAppendMemoryCopy(list, at(c.dst, 0, 0, 0), at(c.src, 0, 0, 0), c.width_bytes, nullptr,
                                            0, nullptr);
    } else if (!region_fits(c)) {
        // COPY-STRIDED: a field past 32 bits: row by row, width_bytes each.
        // Rows are enqueued in order on one list, so a failure part-way leaves
        // earlier rows queued: reported with the row that failed.
        for (size_t z = 0; z < c.depth && r == ZE_RESULT_SUCCESS; ++z)
            for (size_t y = 0; y < c.height && r == ZE_RESULT_SUCCESS; ++y)
                r = d.zeCommandListAppendMemoryCopy(list, at(c.dst, 0, y, z), at(c.src, 0, y, z), c.width_bytes,
                                                    nullptr, 0, nullptr);
    } else if (c.depth == 1) {
        what = "zeCommandListAppendMemoryCopyRegion (2-D)";
        const ze_copy_region_t sr = region(c.src, c, false), dr = region(c.dst, c, false);
        char *src = static_cast<char *>(c.src.ptr) + c.src.z * c.src.slice_pitch;
        char *dst = static_cast<char *>(c.dst.ptr) + c.dst.z * c.dst.slice_pitch;
        r = d.zeCommandListAppendMemoryCopyRegion(list, dst, &dr, static_cast<uint32_t>(c.dst.pitch), 0, src, &sr,
                                                  static_cast<uint32_t>(c.src.pitch), 0, nullptr, 0, nullptr);
    } else {
        // COPY-STRIDED: origins and byte pitches as described, slices too.
        what = "zeCommandListAppendMemoryCopyRegion (3-D)";
        const ze_copy_region_t sr = region(c.src, c, true), dr = region(c.dst, c, true);
        r = d.zeCommandListAppendMemoryCopyRegion(list, c.dst.ptr, &dr, static_cast<uint32_t>(c.dst.pitch),
                                                  static_cast<uint32_t>(c.dst.slice_pitch), c.src.ptr, &sr,
                                                  static_cast<uint32_t>(c.src.pitch),
                                                  static_cast<uint32_t>(c.src.slice_pitch), nullptr, 0, nullptr);
    }
    return r == ZE_RESULT_SUCCESS ? XMC_OK : driver_fail(inst, r, "copy", what);
}

} // namespace xmc::ze
