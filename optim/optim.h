// Everything in optim/: optimizers (SGD, Adam, AdamW), their checkpointing, learning-rate
// schedules and gradient clipping.
#pragma once
#include "optim/adam.h"
#include "optim/checkpoint.h"
#include "optim/clip_grad.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "optim/sgd.h"
