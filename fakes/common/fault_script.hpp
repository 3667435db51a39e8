// The fault-script grammar both fakes take (fakes/README.md): one parser and the
// matching of rules to calls. Each fake describes itself in a Dialect (its entry points,
// which of them take a size or make objects, its result codes); everything else is here.
// Linked statically into both fakes with hidden visibility: nothing here is exported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace xmc_faults {

// One entry point a script may name.
struct Entry {
    const char* name = "";     // as a script names it (CUDA: without its _vN suffix)
    bool takes_size = false;   // size_limit applies: the fake passes the call's size
    bool enqueues = false;     // exec_delay applies: the call queues work that can be held back
    bool nonidentity = false;  // nonidentity applies
    // exhaust applies when set: how many objects made by this entry are alive now
    // (called with the fake's lock held).
    uint64_t (*live)() = nullptr;
};

// What differs between the fakes.
struct Dialect {
    const char* fake = "";          // for messages: "the fake CUDA driver"
    std::vector<Entry> entries;
    // The entry name a written name stands for (CUDA: cuMemAlloc_v2 -> cuMemAlloc);
    // null: names are taken as written.
    std::string_view (*canonical)(std::string_view written) = nullptr;
    bool (*code_by_name)(std::string_view name, int64_t* value) = nullptr;
    const char* code_type = "";     // "CUresult", for messages
    int64_t max_code = 0;           // a code given as a number is 1..max_code
    bool nonidentity_offset = false;  // nonidentity takes a byte offset (else no argument)

    const Entry* find(std::string_view name) const;  // by canonical name, or null
};

enum class Action { fail, delay, exec_delay, nonidentity, size_limit, exhaust };

struct Rule {
    Action action = Action::fail;
    std::string entry;              // canonical name, or "*" (fail and delay only)
    const Entry* target = nullptr;  // the dialect's entry; null for "*"
    int64_t code = 0;               // fail, size_limit, exhaust: what the call answers
    // delay, exec_delay: microseconds; nonidentity: byte offset; size_limit: bytes;
    // exhaust: live objects.
    uint64_t value = 0;
    uint64_t k = 0;                 // WHEN: 0 = every call
    bool and_later = false;         // WHEN is K+
    uint64_t seen = 0;              // calls of the entry since the script was installed
    std::string text;               // the rule as written
};

inline constexpr size_t kMaxScriptBytes = 64 * 1024;
inline constexpr size_t kMaxRules = 256;
inline constexpr uint64_t kMaxK = uint64_t(1) << 40;
inline constexpr uint64_t kMaxDelayUs = 600ull * 1000 * 1000;  // 600 s
inline constexpr uint64_t kMaxOffset = (uint64_t(1) << 40) - 1;
inline constexpr uint64_t kMaxBytes = uint64_t(1) << 62;
inline constexpr uint64_t kMaxObjects = uint64_t(1) << 32;

// Parses a whole script. On a malformed one: false, `out` empty, and `error` names
// the rule ("rule 2 'fail:cuBogus:1': unknown entry point ...").
bool parse(const Dialect& dialect, std::string_view script, std::vector<Rule>& out, std::string& error);

// One call as the rules see it.
struct Call {
    std::string_view entry;  // canonical name
    bool has_size = false;   // the entry takes a size and the call gave one
    uint64_t size = 0;
};

// What the rules decide for one call.
struct Decision {
    bool fail = false;  // answer `code` and do nothing
    int64_t code = 0;
    uint64_t delay_us = 0;       // sleep before the call runs
    uint64_t exec_delay_us = 0;  // hold the queued work back
    bool nonidentity = false;
    uint64_t offset = 0;         // nonidentity's byte offset (0 where it takes none)
};

// Counts the call against every rule naming its entry (or '*') and decides: the first
// fail, size_limit or exhaust rule in the script that fires wins; delays add up; the
// first nonidentity rule that fires gives the offset. Caller holds the fake's lock.
Decision decide(std::vector<Rule>& rules, const Call& call);

}  // namespace xmc_faults
