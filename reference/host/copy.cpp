// Strided copies on the host (capability `copy`, COPY-STRIDED): the
// descriptor is checked whole before anything is enqueued (copy_desc.hpp),
// then the stream's worker copies row by row with memcpy. Every memory kind
// is host memory here, so the kinds only take part in validation. This is the
// reference every other backend's copies are compared with.
#include "host.hpp"

#include <cstring>

namespace xmc::host {

// The copy step of the host's StreamOps: the descriptor, the stream and the slots are checked
// (reference/common/streams.hpp; VMM-UNMAPPED-FAULTS: memcpy into a released slot's range dies by
// SIGSEGV).
xmc_status enqueue_copy(xmc_instance *inst, const xmc_copy_desc &desc, xmc_stream *s) {
    const xmc_copy_desc d = desc;  // the caller's descriptor may go away before the copy runs
    // GRAPH-CAPTURE: recorded while s captures; the op reads and writes the
    // described addresses each time it runs (VMM-GRAPH: a slot's current backing).
    return enqueue_or_record(inst, s, "copy", [d] {
        auto *src = static_cast<const char *>(d.src.ptr);
        auto *dst = static_cast<char *>(d.dst.ptr);
        // COPY-STRIDED: each described row, exactly width_bytes of it.
        for (size_t z = 0; z < d.depth; ++z)
            for (size_t y = 0; y < d.height; ++y)
                std::memcpy(dst + (d.dst.z + z) * d.dst.slice_pitch + (d.dst.y + y) * d.dst.pitch + d.dst.x_bytes,
                            src + (d.src.z + z) * d.src.slice_pitch + (d.src.y + y) * d.src.pitch + d.src.x_bytes,
                            d.width_bytes);
    });
}

} // namespace xmc::host
