// The public frontend: include this one header to write a workload.
#pragma once

#include "core/autograd.h"
#include "core/checkpoint.h"
#include "core/context.h"
#include "core/lazy.h"
#include "core/mesh.h"
#include "core/nn.h"
#include "core/ops.h"
#include "core/optim.h"
#include "core/tensor.h"
