// xmc merge DIR... --out DIR: joins the packages of `qualify --shard I/N` into
// one package (SPEC 9, at fleet scale), which `xmc verify` checks like any
// other. The shards must be of one backend (name, version, library,
// capabilities), one suite (version and git revision), one environment (the
// device list), one selection (filter, tier, must-pass lists, waivers) and
// one N, and together hold each selected catalogue row exactly once; else the
// merge is refused (exit 2) with the reason. The joined results.json records
// its shards (path, share, results digest, requirements, and each shard's
// backend, suite and devices, which verify checks again).
#pragma once
#include <string>
#include <vector>

namespace xmc::conformance {

int merge(const std::vector<std::string> &dirs, const std::string &out_dir);

} // namespace xmc::conformance
