// libFuzzer target: autograd::io::json::parse (autograd/io/json.h): the checkpoint header parser.
// The checks live in fuzz_checks.h, shared with tests/test_fuzz_regressions.cpp. Build and run:
// see tests/fuzz/README.md (make fuzz, make fuzz-run-json).
#include "tests/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::check_json_bytes(data, size);
    return 0;
}
