// libFuzzer target: data::parse_tsv (examples/data/tsv.h): the sentence-pair corpus reader.
// The checks live in fuzz_checks.h, shared with tests/test_fuzz_regressions.cpp. Build and run:
// see tests/fuzz/README.md (make fuzz, make fuzz-run-tsv).
#include "tests/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::check_tsv_bytes(data, size);
    return 0;
}
