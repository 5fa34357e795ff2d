// A synthetic English -> German translation task, generated from a small grammar and lexicon.
//
// Small enough to learn on a laptop CPU in minutes, but word-by-word substitution fails, because
// German needs:
//   - gender and case on articles and adjectives:
//       the big dog sees a small cat .   -> der große Hund sieht eine kleine Katze .
//       a small cat sees the big dog .   -> eine kleine Katze sieht den großen Hund .
//       a big dog sees a red car .       -> ein großer Hund sieht ein rotes Auto .
//       my cat has a big dog .           -> meine Katze hat einen großen Hund .
//   - plurals and verb agreement:  the dogs see cats .  -> die Hunde sehen Katzen .
//   - irregular verbs:             you eat / he eats    -> du isst / er isst ; sieht, liest, mag, hat
//   - "fressen" for animals:       the dog eats an apple . -> der Hund frisst einen Apfel .
//   - negation: "nicht" after a definite object, "kein" for an indefinite one:
//       the dog does not see the cat .  -> der Hund sieht die Katze nicht .
//       the dog does not see a ball .   -> der Hund sieht keinen Ball .
//   - questions with verb-first order:   does the dog see the cat ? -> sieht der Hund die Katze ?
//   - verb-final subordinate clauses:
//       i know that the dog sees the ball .  -> ich weiß , dass der Hund den Ball sieht .
//       he says that we do not like him .   -> er sagt , dass wir ihn nicht mögen .
//
// Output is already tokenized (tokens separated by single spaces): English in lower case,
// German with capitalized nouns (the sentence's first word stays lower case), punctuation as
// separate tokens. English sentences have at most 14 tokens. The generator is deterministic on
// every platform: autograd::Rng and fixed lexicon order, no std:: distributions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "autograd/random.h"
#include "examples/data/tsv.h"

namespace data {

using ToyCorpus = DataSplits;  // train, valid, test

// One random sentence pair (duplicates possible).
Pair sample_toy_pair(autograd::Rng& rng);

// n_train + n_valid + n_test pairs with pairwise distinct English sources, so no source sentence
// is in two splits (nor twice in one). Same seed, same corpus.
ToyCorpus make_toy_corpus(uint64_t seed, size_t n_train = 12000, size_t n_valid = 500, size_t n_test = 500);

}  // namespace data
