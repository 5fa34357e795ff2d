// Everything a program needs from autograd/: include this one header. (The machinery under it,
// autograd/kernels/, is reached through these.)
#pragma once
#include "autograd/anomaly.h"
#include "autograd/data_parallel.h"
#include "autograd/frozen_weights.h"
#include "autograd/fused_ops.h"
#include "autograd/gradcheck.h"
#include "autograd/graph_dot.h"
#include "autograd/mixed_precision.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "autograd/runtime.h"
#include "autograd/tensor.h"
