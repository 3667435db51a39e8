// Maps as JSON files. Format:
// {"shape": [4, 6], "ranks": [{"rank": 0, "shard_shape": [2, 6], "pieces": [{"extents": [2, 6],
//   "logical_offset": 0, "logical_strides": [6, 1], "shard_offset": 0, "shard_strides": [6, 1],
//   "locations": [0], "scale": 1.0}]}]}
// "scale" is optional (default 1). A rank's "padding" (AFF-MAP-FLAT) is optional: [[offset, count], ...],
// written only when the rank declares some. Unknown keys are ignored. Parsing never throws: bad JSON gives
// MalformedJson, a missing or mistyped field MalformedField. Meaning is checked by validate().
#include "detail.hpp"

#include <limits>
#include <nlohmann/json.hpp>

namespace xmc::affine {

using nlohmann::json;
using detail::refuse;

namespace {

// Reads fields, remembering the first problem instead of throwing.
struct Reader {
    std::optional<Refusal> error;

    const json* field(const json& obj, const char* key, const std::string& where) {
        if (error) return nullptr;
        if (!obj.is_object()) return fail(where + " is not an object");
        auto it = obj.find(key);
        if (it == obj.end()) return fail(where + " lacks \"" + key + "\"");
        return &*it;
    }
    const json* fail(const std::string& msg) {
        if (!error) error = refuse(Reason::MalformedField, msg);
        return nullptr;
    }
    int64_t integer(const json* v, const std::string& what, int64_t lo, int64_t hi) {
        if (!v) return 0;
        // Unsigned values above INT64_MAX and floats (even 2.0) are not integers here.
        bool ok = v->is_number_integer() && !(v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX));
        if (ok) {
            int64_t x = v->get<int64_t>();
            if (x >= lo && x <= hi) return x;
        }
        fail(what + " must be an integer in range");
        return 0;
    }
    std::vector<int64_t> ints(const json* v, const std::string& what, int64_t lo, int64_t hi) {
        std::vector<int64_t> out;
        if (!v) return out;
        if (!v->is_array()) return fail(what + " must be an array"), out;
        for (const json& x : *v) out.push_back(integer(&x, what, lo, hi));
        return out;
    }
};

constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min(), kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kIntMin = std::numeric_limits<int>::min(), kIntMax = std::numeric_limits<int>::max();

Map read_map(const json& j, Reader& rd) {
    Map m;
    m.shape = rd.ints(rd.field(j, "shape", "map"), "shape", kI64Min, kI64Max);
    const json* ranks = rd.field(j, "ranks", "map");
    if (ranks && !ranks->is_array()) rd.fail("ranks must be an array");
    if (rd.error) return m;
    for (const json& r : *ranks) {
        RankLayout rl;
        rl.rank = int(rd.integer(rd.field(r, "rank", "rank entry"), "rank", kIntMin, kIntMax));
        const std::string w = "rank " + std::to_string(rl.rank);
        rl.shard_shape = rd.ints(rd.field(r, "shard_shape", w), "shard_shape", kI64Min, kI64Max);
        const json* pieces = rd.field(r, "pieces", w);
        if (pieces && !pieces->is_array()) rd.fail(w + " pieces must be an array");
        if (rd.error) return m;
        for (const json& pj : *pieces) {
            Piece p;
            const std::string pw = w + " piece";
            p.extents = rd.ints(rd.field(pj, "extents", pw), "extents", kI64Min, kI64Max);
            p.logical_offset = rd.integer(rd.field(pj, "logical_offset", pw), "logical_offset", kI64Min, kI64Max);
            p.logical_strides = rd.ints(rd.field(pj, "logical_strides", pw), "logical_strides", kI64Min, kI64Max);
            p.shard_offset = rd.integer(rd.field(pj, "shard_offset", pw), "shard_offset", kI64Min, kI64Max);
            p.shard_strides = rd.ints(rd.field(pj, "shard_strides", pw), "shard_strides", kI64Min, kI64Max);
            for (int64_t x : rd.ints(rd.field(pj, "locations", pw), "locations", kIntMin, kIntMax))
                p.locations.push_back(int(x));
            if (pj.is_object() && pj.contains("scale")) {
                if (pj["scale"].is_number()) p.scale = pj["scale"].get<double>();
                else rd.fail(pw + " scale must be a number");
            }
            rl.pieces.push_back(std::move(p));
        }
        if (r.contains("padding")) {  // (r is an object: "pieces" was found in it)
            const json& pad = r["padding"];
            if (!pad.is_array()) rd.fail(w + " padding must be an array");
            else
                for (const json& sp : pad) {
                    if (!sp.is_array() || sp.size() != 2) {
                        rd.fail(w + " padding span must be [offset, count]");
                        break;
                    }
                    rl.padding.push_back({rd.integer(&sp[0], "padding offset", kI64Min, kI64Max),
                                          rd.integer(&sp[1], "padding count", kI64Min, kI64Max)});
                }
            if (rd.error) return m;
        }
        m.ranks.push_back(std::move(rl));
    }
    return m;
}

}  // namespace

Result<Map> from_json(const std::string& text) {
    try {
        json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded()) return refuse(Reason::MalformedJson, "not valid JSON");
        Reader rd;
        Map m = read_map(j, rd);
        if (rd.error) return *rd.error;
        return m;
    } catch (const std::exception& e) {  // e.g. out of memory: still a refusal, never an escape
        return refuse(Reason::MalformedJson, std::string("cannot read map: ") + e.what());
    }
}

std::string to_json(const Map& m) {
    json j;
    j["shape"] = m.shape;
    j["ranks"] = json::array();
    for (const RankLayout& r : m.ranks) {
        json jr{{"rank", r.rank}, {"shard_shape", r.shard_shape}, {"pieces", json::array()}};
        for (const Piece& p : r.pieces)
            jr["pieces"].push_back({{"extents", p.extents},
                                    {"logical_offset", p.logical_offset},
                                    {"logical_strides", p.logical_strides},
                                    {"shard_offset", p.shard_offset},
                                    {"shard_strides", p.shard_strides},
                                    {"locations", p.locations},
                                    {"scale", p.scale}});
        if (!r.padding.empty()) {
            jr["padding"] = json::array();
            for (const Span& sp : r.padding) jr["padding"].push_back({sp.offset, sp.count});
        }
        j["ranks"].push_back(std::move(jr));
    }
    return j.dump();
}

}  // namespace xmc::affine
