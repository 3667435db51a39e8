/* The recorded-result file of the CUDA driver probe (xmc_cuda_probe).
 *
 * A recording says, for a FIXED list of named call sequences ("cases"), what a
 * driver answered. It is made once on real hardware (e.g.
 * hardware/probe/cuda_driver_580_h200.tsv) and replayed against the fake CUDA
 * driver in every PR, so the fake's behaviour on misuse follows the real one.
 *
 * Format (version 1), UTF-8 text, one line each, '\n' line ends:
 *
 *   # free text                           comment (driver version, device, date)
 *   <case> TAB <result> TAB <code> [TAB <note>]
 *
 *   case    [a-z0-9_]+, unique in the file: the probe's case name.
 *   result  one word without blanks: a CUresult name (CUDA_SUCCESS,
 *           CUDA_ERROR_INVALID_VALUE, ...) for a case that records a call's
 *           result, or a value word for a case that records an observation:
 *             value              a number, in <code> (e.g. a granularity)
 *             identity / non_identity   a device pointer equals / differs
 *                                from the host pointer (code 0 / 1)
 *             yes / no           (code 1 / 0)
 *             at_release / at_unmap / never   when memory was returned
 *             skipped            the case could not run here (e.g. it needs two
 *                                devices); never compared
 *             missing_entry      the driver does not export an entry point the
 *                                case calls (code 0; the note names it): the
 *                                probe resolves the capture, graph and IPC entry
 *                                points as optional, so it still runs every
 *                                case on a driver (the fake today) that lacks
 *                                them. It is an answer, not a verdict, and is
 *                                compared like one: against a recording of the
 *                                real driver it is a mismatch until the fake
 *                                exports the entry point
 *           or a probe verdict: SETUP_FAILED (a call before the one under test
 *           failed; code is its CUresult), CRASHED_SIGNAL_<n>, TIMEOUT,
 *           NO_RESULT.
 *   code    a decimal integer: the CUresult's number, or the value.
 *   note    optional free text (no TAB): detail for humans, never compared.
 *
 * Replay compares <result> and <code> of every case exactly (numbers such as
 * granularities too); a recorded case the probe does not know is a mismatch;
 * a case the recording lacks is reported, not failed.
 */
#ifndef XMC_PROBE_FORMAT_H
#define XMC_PROBE_FORMAT_H

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace xmc::probe {

inline constexpr int kFormatVersion = 1;

struct Record {
    std::string name;    // case name
    std::string result;  // CUresult name or value word
    int64_t code = 0;    // CUresult number or value
    std::string note;    // free text, not compared
    int line = 0;        // line number in the file it was read from (0: not read)
};

struct Recording {
    std::vector<std::string> comments;  // comment lines without the leading "# "
    std::vector<Record> records;
};

// True when `name` is a valid case name ([a-z0-9_]+).
bool valid_case_name(const std::string& name);

// Parses a recording; on malformed input returns false and says where and why
// in `error` (it never throws on bad input).
bool parse_recording(std::istream& in, Recording& out, std::string& error);

// Reads a file; false with `error` when it cannot be opened or is malformed.
bool read_recording(const std::string& path, Recording& out, std::string& error);

// One record line, without the trailing newline. TABs and newlines in the
// note are replaced by blanks so the line stays well formed.
std::string format_record(const Record& r);

// Finds a record by case name, or null.
const Record* find_record(const Recording& rec, const std::string& name);

}  // namespace xmc::probe

#endif
