// Save and load a module's parameters as a safetensors file (see autograd/io/safetensors.h), named by
// named_parameters() ("encoder.layers.0.self_attn.w_q.weight"), F32, so the file opens in
// Python too: safetensors.numpy.load_file("model.safetensors").
#pragma once
#include <map>
#include <string>

#include "autograd/io/safetensors.h"
#include "nn/module.h"

namespace nn {

using Metadata = std::map<std::string, std::string>;

// Atomic: a crash or a full disk during save never destroys an earlier checkpoint at `path`.
void save(const Module& module, const std::string& path, const Metadata& metadata = {});

// Checks everything before changing anything: every parameter present with its shape and dtype
// F32 and finite values (a NaN or Inf is named with its place: "'w_q.weight' holds NaN at element
// 17"), no unexpected names (unless allow_unexpected, e.g. optimizer state stored alongside).
// On any problem throws std::runtime_error listing what is wrong; the module is left untouched.
// Returns the file's metadata (training step, config, ...).
Metadata load(Module& module, const std::string& path, bool allow_unexpected = false);
// The same, from a file already read.
void load_parameters(Module& module, const autograd::io::SafetensorsFile& file, const std::string& path, bool allow_unexpected = false);

// One F32 record per parameter, named as named_parameters() names it.
std::vector<autograd::io::TensorRecord> parameter_records(const Module& module);

}  // namespace nn
