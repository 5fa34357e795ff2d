// Optimizer checkpoints: an optimizer's whole state as safetensors records, so a resumed run
// continues bit for bit (the model's parameters are saved by nn::save, nn/serialization.h).
//
//   optim::save_optimizer(opt, "opt.safetensors");   ...   optim::load_optimizer(opt2, "opt.safetensors");
//
// The records:
//   "optim.step_count"    I64 ()   step() calls so far
//   "optim.lr"            F32 ()   the current learning rate (a schedule may have changed it)
//   "optim.param_steps"   I64 (P)  updates each parameter has received (Adam's bias correction)
//   "<rule>.<buffer>.<i>" F32, shaped like parameter i, e.g. "adam.m.3", "sgd.momentum_buffer.0";
//                         <rule> is name() in lower case. Before the first step() the buffers are
//                         written as zeros, which is exactly their initial value.
// The metadata: "optim.type" = name() (checked on load), and "optim.<option>" for each of
// hyperparameters() (informative only: a loaded state keeps the options the optimizer was built with).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "autograd/io/safetensors.h"
#include "optim/optimizer.h"

namespace optim {

std::vector<autograd::io::TensorRecord> state_records(const Optimizer& opt);
std::map<std::string, std::string> state_metadata(const Optimizer& opt);

// Restores what state_records() wrote. Checks everything first — the "optim.type" metadata, every
// expected record present with its dtype and shape, no unexpected "optim.*" or "<rule>.*" records,
// valid values — and throws std::runtime_error listing the problems, leaving `opt` untouched.
// Records outside those two prefixes are ignored (e.g. model weights saved in the same file).
void load_state_records(Optimizer& opt, const autograd::io::SafetensorsFile& file);

// Write state_records(opt) and state_metadata(opt) (plus `metadata`, whose keys must not start
// with "optim.") to `path` as safetensors. Atomic, as autograd::io::save_safetensors.
void save_optimizer(const Optimizer& opt, const std::string& path, std::map<std::string, std::string> metadata = {});
// Read `path` and load_state_records() it; errors are std::runtime_error naming the path.
void load_optimizer(Optimizer& opt, const std::string& path);

}  // namespace optim
