// libFuzzer target: data::tokenize/detokenize, the UTF-8 helpers, Vocab and corpus_bleu (examples/data/).
// The checks live in fuzz_checks.h, shared with tests/test_fuzz_regressions.cpp. Build and run:
// see tests/fuzz/README.md (make fuzz, make fuzz-run-tokenizer).
#include "tests/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::check_tokenizer_bytes(data, size);
    return 0;
}
