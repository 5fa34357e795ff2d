// Our own seeded random numbers. std:: distributions produce different streams on different
// standard libraries, so every draw here is our own arithmetic: the same seed gives the same
// numbers on every machine.
#pragma once
#include <cstdint>

namespace autograd {

// splitmix64's output function (Steele, Lea & Flood 2014): a bijective mix of 64 bits, so that
// nearby inputs (seed, seed + 1, ...) give unrelated outputs. The one copy of the mixer: it seeds
// Rng, and makes counter_uniform's draws.
inline uint64_t splitmix64_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
// splitmix64 as a generator: advance the state by the golden-ratio constant, then mix.
inline uint64_t splitmix64(uint64_t& state) { return splitmix64_mix(state += 0x9e3779b97f4a7c15ULL); }

// A uniform number in [0, 1) that depends only on (seed, i): the i-th output of splitmix64 started
// at seed, computed directly. A counter-based draw: element i of a dropout mask gets the same
// decision whichever thread computes it, and the backward recomputes it instead of storing a mask.
// The top 24 bits go to float through int32_t: they fit, so the value is the same, and a loop of
// draws then vectorizes on AVX2 (it has no instruction for uint64 -> float; AVX-512 has).
inline float counter_uniform(uint64_t seed, uint64_t i) {
    const uint64_t top24 = splitmix64_mix(seed + (i + 1) * 0x9e3779b97f4a7c15ULL) >> 40;
    return static_cast<float>(static_cast<int32_t>(top24)) * (1.0f / 16777216.0f);
}

// xoshiro256** (Blackman & Vigna): small state, fast, statistically strong; seeded via splitmix64.
class Rng {
public:
    explicit Rng(uint64_t seed = 0) { seed_(seed); }
    void seed_(uint64_t seed);
    uint64_t next_u64();
    float uniform();                       // [0, 1), 24 random bits: every float is exactly representable
    float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
    float normal();                        // mean 0, std 1 (Box-Muller)
    uint32_t below(uint32_t n);            // integer in [0, n), unbiased (rejection)

    struct State { uint64_t s[4]; float spare; bool has_spare; };
    State state() const { return {{s_[0], s_[1], s_[2], s_[3]}, spare_, has_spare_}; }
    void set_state(const State& st);   // (as JSON in a checkpoint: models/checkpoint.h)

private:
    uint64_t s_[4];
    float spare_ = 0.0f;      // Box-Muller makes two normals; the second waits here
    bool has_spare_ = false;
};

// The process-wide generator used by rand/randn/uniform, dropout and init.
Rng& default_rng();
// Reseed the default generator: every run after manual_seed(n) draws the same numbers.
void manual_seed(uint64_t seed);

namespace detail {
// Make r this thread's default_rng() (nullptr: the process-wide one again); returns the previous.
// Each shard of a data-parallel step draws from its own generator (autograd/data_parallel.h).
Rng* exchange_thread_rng(Rng* r);
}  // namespace detail

}  // namespace autograd
