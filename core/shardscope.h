// The public frontend: include this one header to write a workload.
#pragma once

#include "core/auto_shard.h"
#include "core/autocast.h"
#include "core/autograd.h"
#include "core/checkpoint.h"
#include "core/compile.h"
#include "core/context.h"
#include "core/lazy.h"
#include "core/mesh.h"
#include "core/nn.h"
#include "core/ops.h"
#include "core/ops_cnn.h"
#include "core/optim.h"
#include "core/remat.h"
#include "core/tensor.h"
