// Comparing a C++ result with a PyTorch fixture: tests/reference/*.safetensors, written by the
// make_*_reference.py scripts beside them (float64 results from float32 inputs, so what differs
// is the C++ float32 rounding alone). Tensors are read by name, and a group of them is judged by
// its worst element:
//
//   const io::SafetensorsFile f = io::load_safetensors("tests/reference/gpt_reference.safetensors");
//   fixture::Worst w;
//   fixture::compare("loss", loss, f, "loss", w, kFloor);
//   CHECK_MESSAGE(w.err <= kRelTol, "loss differs from PyTorch: " << w.describe(kRelTol));
//
// err = |C++ - PyTorch| / max(|PyTorch|, floor), element by element: relative, except for values
// below the floor, where the same rounding is no longer small against the value (each test file
// says why its floor is what it is).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/io/safetensors.h"
#include "autograd/tensor.h"

namespace fixture {

namespace io = autograd::io;

// The worst element of a group of tensors.
struct Worst {
    double err = -1.0;   // -1: nothing compared yet
    std::string what;    // which tensor
    int64_t index = -1;  // flat index in it
    float got = 0.0f, want = 0.0f;
    std::string describe(double tolerance) const {
        char s[320];
        std::snprintf(s, sizeof s, "worst: %s, flat index %lld: C++ %.9g, PyTorch %.9g (relative error %.3g, tolerance %g)",
                      what.c_str(), (long long)index, got, want, err, tolerance);
        return s;
    }
};

inline const io::TensorRecord& record(const io::SafetensorsFile& f, const std::string& name) {
    const io::TensorRecord* r = f.find(name);
    if (!r) throw std::runtime_error("reference fixture has no tensor '" + name + "'");
    return *r;
}
inline std::vector<float> f32(const io::SafetensorsFile& f, const std::string& name) { return io::as_f32(record(f, name)); }
inline autograd::Tensor tensor(const io::SafetensorsFile& f, const std::string& name) {
    return autograd::Tensor::from_vector(f32(f, name), record(f, name).shape);
}
inline autograd::Tokens tokens(const io::SafetensorsFile& f, const std::string& name) {
    return autograd::Tokens(io::as_i32(record(f, name)), record(f, name).shape);
}

// Folds want.size() elements of `got` against `want` into `worst` (a NaN is the worst).
inline void compare(const std::string& what, const float* got, const std::vector<float>& want, Worst& worst, double floor) {
    for (size_t i = 0; i < want.size(); i++) {
        const double err = std::fabs(static_cast<double>(got[i]) - want[i]) / std::max<double>(std::fabs(want[i]), floor);
        if (!(err <= worst.err)) worst = {err, what, static_cast<int64_t>(i), got[i], want[i]};
    }
}
// The same for a tensor against the fixture's tensor `name`, whose shape it must have.
inline void compare(const std::string& what, const autograd::Tensor& got, const io::SafetensorsFile& f, const std::string& name,
                    Worst& worst, double floor) {
    REQUIRE_MESSAGE(got.defined(), what << " is undefined");
    REQUIRE(got.shape() == record(f, name).shape);
    compare(what, got.data(), f32(f, name), worst, floor);
}

}  // namespace fixture
