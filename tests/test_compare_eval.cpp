// The reverse task's batches (examples/data/copy_task_data.h): the copy task's sources, the
// target backwards.
#include <doctest/doctest.h>

#include <algorithm>
#include <iterator>
#include <vector>

#include "autograd/autograd.h"
#include "examples/data/copy_task_data.h"

using namespace autograd;

namespace {

std::vector<int32_t> row(const Tokens& t, int64_t b) {
    const int64_t n = t.size(1);
    return {t.data.begin() + b * n, t.data.begin() + (b + 1) * n};
}

}  // namespace

TEST_CASE("make_reverse_batch: the copy batch's sources; the target is the start symbol, then the source backwards") {
    Rng a(5), b(5);
    const int64_t V = 7, B = 3, L = 6;
    const models::Batch copy = data::make_copy_batch(a, V, B, L);
    const models::Batch rev = data::make_reverse_batch(b, V, B, L);
    CHECK(rev.src.data == copy.src.data);   // the same draws from the same stream
    CHECK(rev.ntokens == B * (L - 1));
    for (int64_t i = 0; i < B; i++) {
        const std::vector<int32_t> src = row(rev.src, i);
        std::vector<int32_t> tgt = {data::COPY_START};         // built here with std::reverse_copy
        std::reverse_copy(src.begin() + 1, src.end(), std::back_inserter(tgt));
        CHECK(row(rev.tgt_in, i) == std::vector<int32_t>(tgt.begin(), tgt.end() - 1));
        CHECK(row(rev.tgt_out, i) == std::vector<int32_t>(tgt.begin() + 1, tgt.end()));
    }
    SUBCASE("by hand: 1 4 2 6 3 5 becomes 1 5 3 6 2 4") {
        Rng r(11);
        const models::Batch one = data::make_reverse_batch(r, 7, 1, 6);
        const std::vector<int32_t> s = row(one.src, 0);
        CHECK(row(one.tgt_out, 0) == std::vector<int32_t>{s[5], s[4], s[3], s[2], s[1]});
        CHECK(row(one.tgt_in, 0) == std::vector<int32_t>{1, s[5], s[4], s[3], s[2]});
    }
}
