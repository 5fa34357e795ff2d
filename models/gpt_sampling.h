// Writing with a trained GPT (models/gpt.h): draw the next token from the model's distribution
// (temperature, top-k, top-p: models::sampling_probs), append it, repeat.
//
//   models::GenerateOptions opt{.new_tokens = 500, .temperature = 0.8f, .top_k = 40, .seed = 1};
//   Tokens out = models::generate(model, prompt, opt);   // prompt (B, T0) -> (B, T0 + 500)
//
// The context window. The learned positions end at block_size: the model never saw position 64
// of a 64-token window. So the context a token is predicted from is a window of at most
// block_size tokens. Once a window is full, the next one starts from the last half of the text
// (max(1, block_size / 2) tokens), and grows again: a token sees between half a window and a
// whole one of the text before it. (nanoGPT slides the window by one token at every step: always
// a whole window, but the positions of every token change at every step, so nothing computed
// for one step is of use to the next.)
//
// Two ways to compute the same tokens. kv_cache = false, the plain one: at every step the whole
// model over the whole window (GPT::logits), the last position's scores kept. kv_cache = true:
// each token runs through the model once, at its position in the window, its keys and values
// kept in every layer's cache (models/decoder_cache.h, the encoder-decoder's); a new window
// runs its first tokens through a fresh cache. A token costs one position-pass instead of up to
// block_size; tests/test_gpt.cpp holds the tokens equal.
#pragma once
#include <cstdint>
#include <vector>

#include "models/gpt.h"

namespace models {

struct GenerateOptions {
    int64_t new_tokens = 100;   // tokens appended to every row
    float temperature = 1.0f;   // p_i ∝ exp(z_i / T), > 0
    int top_k = 0;              // the k most likely tokens only; 0: all V
    float top_p = 1.0f;         // the fewest most likely tokens whose probability reaches top_p; 1: all
    uint64_t seed = 0;          // row b's i-th new token uses counter_uniform(seed, b * new_tokens + i)
    bool kv_cache = true;       // false: the whole window through the whole model at every step
    int64_t* positions = nullptr;   // when set, gets the model's work added: the positions it ran
};

// Where the window starts for a text of `length` tokens whose window started at `start`, in a
// model of context block_size: `start` while the window holds at most block_size tokens, else
// length - max(1, block_size / 2) (length - block_size for a prompt longer than a whole window:
// prompt = true).
int64_t window_start(int64_t length, int64_t start, int64_t block_size, bool prompt = false);

// prompt (B, T0), T0 >= 1, every id in [0, V) -> (B, T0 + new_tokens): the prompt, then the tokens
// drawn. Bad options throw std::invalid_argument naming them. Under NoGradGuard inside.
Tokens generate(GPT& model, const Tokens& prompt, const GenerateOptions& opt);

}  // namespace models
