// What a resumed run must match: the identity a run's state records (examples/common/run_state.h),
// walked entry by entry. For each example the test gives one change per entry (a flag given
// another value, another file); each alone must make --resume refuse, naming that entry and
// nothing else, and the changes must cover exactly the entries the state records. So an entry
// dropped from an example's identity(), or filled from the wrong option, fails a test.
//
//   check_identity_walk("gpt", args, state, {{"--lr", {"--lr", "0.02"}, "0.02"}, ...});
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "autograd/io/crc32c.h"
#include "autograd/io/json.h"
#include "autograd/io/safetensors.h"
#include "tests/run_example.h"

// One entry of the identity and a change of it alone.
struct IdentityChange {
    std::string entry;                        // the identity's key: "--lr", "--data", "vocabularies and merges"
    std::vector<std::string> args;            // what the resumed run adds to the run's own flags
    std::string new_text = "";                // what the refusal says it became ("0.02", "true"); "" to skip that check
    std::vector<std::string> also = {};       // entries the same change may move too (the vocabularies a --bpe makes)
    std::string state = "";                   // another state to resume from ("" : the run's own)
};

// {"bytes":1497,"crc32c":"a3209f0b"}: the fingerprint of a file holding `bytes`, as a run's identity
// records it (common::file_fingerprint), worked out here.
inline std::string fingerprint_of(const std::string& bytes) {
    return "{\"bytes\":" + std::to_string(bytes.size()) + ",\"crc32c\":\"" +
           autograd::io::crc32c_hex(autograd::io::crc32c(bytes.data(), bytes.size())) + "\"}";
}

// The keys of the identity recorded in a run's state.
inline std::set<std::string> recorded_identity(const std::string& state) {
    namespace json = autograd::io::json;
    const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(state);
    REQUIRE(f.metadata.count("resume"));
    const json::Value resume = json::parse(f.metadata.at("resume"));
    const json::Value* identity = resume.find("identity");
    REQUIRE(identity);
    std::set<std::string> keys;
    for (const auto& entry : identity->as_object()) keys.insert(entry.first);
    return keys;
}

// The differences a refusal names: "--seed 1 -> 2, --batch 16 -> 8" from "'m' is the state of
// another run: --seed 1 -> 2, --batch 16 -> 8. Resume with ...". (A file's fingerprint is compact
// JSON: no ", " inside.)
inline std::vector<std::string> named_differences(const std::string& err) {
    const std::string from = "is the state of another run: ", to = ". Resume with that run's flags";
    const size_t begin = err.find(from), end = err.find(to);
    if (begin == std::string::npos || end == std::string::npos || end < begin) return {};
    const std::string list = err.substr(begin + from.size(), end - begin - from.size());
    std::vector<std::string> out;
    for (size_t at = 0;;) {
        const size_t comma = list.find(", ", at);
        out.push_back(list.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
        if (comma == std::string::npos) return out;
        at = comma + 2;
    }
}

// A copy of the run's state at `from`, at `to`, with the identity's `entry` recorded as `value`:
// the state of a run whose derived entry (the vocabularies its data made) was another. The
// metadata is JSON in the header; the tensors and their checksums stay as they are.
inline void write_with_identity_entry(const std::string& from, const std::string& to, const std::string& entry, const std::string& value) {
    namespace json = autograd::io::json;
    const std::string bytes = read_whole_file(from);
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
    json::Value header = json::parse(bytes.substr(8, n));
    REQUIRE(header.as_object().front().first == "__metadata__");
    json::Value& meta = header.as_object().front().second;
    json::Value resume = json::parse(meta.find("resume")->as_string());
    json::Value identity = *resume.find("identity");
    REQUIRE(identity.find(entry));
    identity.set(entry, value);
    resume.set("identity", identity);
    meta.set("resume", json::dump(resume));
    std::string text = json::dump(header);
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string length(8, '\0');
    for (int i = 0; i < 8; i++) length[i] = static_cast<char>(text.size() >> (8 * i));
    std::ofstream(to, std::ios::binary) << length << text << bytes.substr(8 + n);
}

// Every change alone, resumed from `state` with the run's `args`: refused (status 1) before a
// step, naming its entry (and at most the entries in `also`); and the changes cover exactly the
// identity the state records. `skip(change)` true: the change cannot run on this machine (--bf16
// without AVX512_BF16); its entry is still required to be recorded.
template <class Skip>
void check_identity_walk(const std::string& program, const std::vector<std::string>& args, const std::string& state,
                         const std::vector<IdentityChange>& changes, Skip skip) {
    std::set<std::string> walked;
    for (const IdentityChange& c : changes) walked.insert(c.entry);
    CHECK(walked == recorded_identity(state));   // every entry of identity() has its change here, and only those
    for (const IdentityChange& c : changes) {
        CAPTURE(c.entry);
        if (skip(c)) {
            MESSAGE("not run on this machine: " << c.entry);
            continue;
        }
        std::vector<std::string> resumed = args;
        resumed.insert(resumed.end(), c.args.begin(), c.args.end());
        resumed.insert(resumed.end(), {"--resume", c.state.empty() ? state : c.state});
        const ExampleRun r = run_example(program, resumed);
        INFO(r.err);
        CHECK(r.status == 1);
        const std::vector<std::string> named = named_differences(r.err);
        bool names_it = false;
        for (const std::string& d : named) {
            CAPTURE(d);
            const bool mine = d.rfind(c.entry + " ", 0) == 0;
            bool allowed = mine;
            for (const std::string& a : c.also) allowed = allowed || d.rfind(a + " ", 0) == 0;
            CHECK(allowed);   // nothing else is named: each entry holds its own option
            if (mine) {
                names_it = true;
                const std::string to = " -> " + c.new_text;
                if (!c.new_text.empty()) CHECK((d.size() >= to.size() && d.compare(d.size() - to.size(), to.size(), to) == 0));
            }
        }
        CHECK(names_it);
    }
}
