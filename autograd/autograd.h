// Everything in autograd/: include this one header.
#pragma once
#include "autograd/kernels/allocator.h"
#include "autograd/anomaly.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/gemm_bf16.h"
#include "autograd/kernels/gemm_dispatch.h"
#include "autograd/mixed_precision.h"
#include "autograd/fused_kernels.h"
#include "autograd/gradcheck.h"
#include "autograd/graph_dot.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "autograd/tensor.h"
