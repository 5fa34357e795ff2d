#include "autograd/random.h"

#include <cmath>

namespace autograd {

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void Rng::seed_(uint64_t seed) {
    uint64_t x = seed;
    for (auto& w : s_) w = splitmix64(x);   // splitmix spreads any seed (even 0) over the state
    has_spare_ = false;
}

uint64_t Rng::next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0]; s_[3] ^= s_[1]; s_[1] ^= s_[2]; s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

float Rng::uniform() {
    return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f);   // top 24 bits / 2^24
}

float Rng::normal() {
    if (has_spare_) { has_spare_ = false; return spare_; }
    // Box-Muller: two uniforms -> two independent normals. u1 in (0, 1] so log(u1) is finite.
    const double u1 = (static_cast<double>(next_u64() >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    const double u2 = static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0);
    const double r = std::sqrt(-2.0 * std::log(u1)), theta = 2.0 * M_PI * u2;
    spare_ = static_cast<float>(r * std::sin(theta));
    has_spare_ = true;
    return static_cast<float>(r * std::cos(theta));
}

uint32_t Rng::below(uint32_t n) {
    // reject the top sliver of the 32-bit range that would make small values more likely
    const uint32_t limit = UINT32_MAX - UINT32_MAX % n;
    uint32_t x;
    do { x = static_cast<uint32_t>(next_u64() >> 32); } while (x >= limit);
    return x % n;
}

void Rng::set_state(const State& st) {
    for (int i = 0; i < 4; i++) s_[i] = st.s[i];
    spare_ = st.spare;
    has_spare_ = st.has_spare;
}

static Rng& process_rng() {
    static Rng g(0);
    return g;
}
static thread_local Rng* tl_rng = nullptr;   // a shard's own generator (data_parallel.h)

Rng& default_rng() { return tl_rng ? *tl_rng : process_rng(); }

void manual_seed(uint64_t seed) { process_rng().seed_(seed); }

Rng* detail::exchange_thread_rng(Rng* r) {
    Rng* prev = tl_rng;
    tl_rng = r;
    return prev;
}

}  // namespace autograd
