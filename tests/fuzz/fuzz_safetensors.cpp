// libFuzzer target: autograd::io::load_safetensors (autograd/io/safetensors.h): the input is written to a temp file and loaded.
// The checks live in fuzz_checks.h, shared with tests/test_fuzz_regressions.cpp. Build and run:
// see tests/fuzz/README.md (make fuzz, make fuzz-run-safetensors).
#include "tests/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::check_safetensors_bytes(data, size);
    return 0;
}
