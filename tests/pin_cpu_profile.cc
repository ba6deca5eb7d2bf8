// Linked into every test program (tests/CMakeLists.txt): pins the `cpu` chip
// profile to the fixed values of compiler/cost_model.cc, so modeled-clock
// goldens hold on any machine and no test process calibrates
// (runtime/cpu_calibration.h). A caller's own $SHARDSCOPE_CPU_PROFILE wins;
// child processes (the `shardscope` binary an e2e test runs) inherit it.
#include <cstdlib>

namespace {
const bool pinned = [] { return setenv("SHARDSCOPE_CPU_PROFILE", "fixed", /*overwrite=*/0) == 0; }();
}  // namespace
