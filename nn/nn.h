// Everything in nn/: include this one header.
#pragma once
#include "nn/attention.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/feed_forward.h"
#include "nn/init.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/positional_encoding.h"
#include "nn/recurrent.h"
#include "nn/serialization.h"
