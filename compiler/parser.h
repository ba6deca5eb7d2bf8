// ParseModule: reads the StableHLO text that PrintModule writes (and the same
// forms written by hand) back into a Module: parameters with their
// mhlo.sharding and shardscope.name attributes, every op of SHARDSCOPE_OPCODES
// in its pretty or generic form, loc("scope"("file":line:col)) locations and
// result shardings. Errors name the line and column. The result is verified.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/ir.h"

namespace shardscope::compiler {

absl::StatusOr<std::unique_ptr<Module>> ParseModule(absl::string_view text);

}  // namespace shardscope::compiler
