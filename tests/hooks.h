// What the tests may look at and switch that a program never needs: counters the library keeps
// of what it did, and switches that force one path. Declared here, for the tests alone; each is
// defined beside what it counts or switches.
#pragma once
#include <cstdint>

#include "autograd/kernels/busy_cores.h"

namespace autograd::test_hooks {
int64_t live_node_count();        // graph nodes alive right now (autograd/tensor.cpp): tests count leaks
int64_t frozen_weight_packs();    // bf16 weights packed by FrozenWeightsGuards so far (autograd/frozen_weights.cpp)
}  // namespace autograd::test_hooks

namespace autograd::kernels::test_hooks {
int64_t threaded_regions();          // loops that took their threaded path so far (kernels/parallel.cpp)
int64_t gemm_pairs_side_by_side();   // gemm_pair_in calls that ran one product per thread (kernels/gemm_dispatch.cpp)
// The dW products (A transposed, B not) read their operands in place (1), pack them (0), or do
// as the micro-kernel's instruction set says (-1, the default; kernels/gemm.cpp)
void set_gemm_tn_in_place(int mode);
// The busy-cores watch (kernels/busy_cores.h): tests of a threaded path turn it off, so that a
// loaded test machine cannot send them down the serial one; the tests of the policy turn it on.
void set_busy_cores_watch(bool on);
bool busy_cores_watch();
BusyCores& busy_cores_state();
}  // namespace autograd::kernels::test_hooks
