// The input gradient of a stride-2 3x3 convolution, as the cnn's backward
// makes it: the output gradient [4,32,16,16] dilated by 2 into [4,16,32,32],
// the kernel [32,16,3,3] read as [i, o] (cost_model_test.cc,
// cost_model_measured_test.cc).
#pragma once

#include "compiler/ir.h"

namespace shardscope::compiler {

inline Instruction* StridedConvInputGradient(Module& m) {
  auto* g = m.Parameter(Shape(DType::kF32, {4, 32, 16, 16}), "g");
  auto* w = m.Parameter(Shape(DType::kF32, {32, 16, 3, 3}), "w");
  ConvDims d;
  d.input_spatial = d.kernel_spatial = d.output_spatial = {2, 3};
  d.kernel_input_feature = 0;
  d.kernel_output_feature = 1;
  d.window_strides = {1, 1};
  d.padding = {{1, 2}, {1, 2}};
  d.lhs_dilation = {2, 2};
  return m.Convolution(g, w, d);
}

}  // namespace shardscope::compiler
