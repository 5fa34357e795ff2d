// The numbers of examples/attention_by_hand.cpp, worked by hand in docs/07-attention.md: a
// 3-token sentence with Dk = 4. In a header so that tests/test_docs.cpp holds the chapter's
// quoted results to them. Change them and rerun the example: everything printed follows.
#pragma once

namespace data::attention_by_hand {

inline constexpr int T = 3;    // tokens in the sentence (queries = keys = values: self-attention)
inline constexpr int DK = 4;   // width of each query, key and value vector; 1/sqrt(4) = 0.5 keeps the arithmetic easy
inline const char* const TOKENS[T] = {"the", "cat", "sleeps"};

// One row per token. Q: what each token is looking for; K: what each token offers to be found
// by; V: what each token hands over when it is attended to.
inline constexpr float Q[T][DK] = {
    {1, 0, 1, 0},    // "the"    matches keys with features 0 and 2
    {0, 2, 0, 2},    // "cat"    strongly wants features 1 and 3
    {1, 1, 1, 1},    // "sleeps" wants everything equally
};
inline constexpr float K[T][DK] = {
    {1, 0, 1, 0},    // "the"
    {0, 1, 0, 1},    // "cat"
    {1, 1, 0, 0},    // "sleeps"
};
inline constexpr float V[T][DK] = {  // columns 0..2 say "from which token"; column 3 is shared by all tokens
    {1, 0, 0, 1},    // "the"
    {0, 1, 0, 1},    // "cat"
    {0, 0, 1, 1},    // "sleeps"
};

}  // namespace data::attention_by_hand
