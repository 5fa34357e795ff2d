// Dropout (Srivastava et al. 2014), "inverted": in training, zero each element with probability p
// and scale the survivors by 1/(1-p), so evaluation needs no rescaling and is the identity.
#pragma once
#include "nn/module.h"

namespace nn {

// Each call draws one 64-bit seed from the default generator; element i is then kept iff
// uniform(seed, i) >= p, a counter-based draw (a hash of seed and i). So the decisions do not
// depend on which thread handles which element, and the backward recomputes them instead of
// storing a mask.
Tensor dropout(const Tensor& x, float p, bool training);

// A uniform number in [0, 1) that depends only on (seed, i): splitmix64's mixing of seed + i * phi.
inline float counter_uniform(uint64_t seed, uint64_t i) {
    uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

class Dropout : public Module {
public:
    explicit Dropout(float p = 0.1f);
    Tensor forward(const Tensor& x) const { return dropout(x, p, is_training()); }   // same shape
    float p;
};

}  // namespace nn
