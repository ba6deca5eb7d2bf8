// Driver commands of the CLI (run, ...): they drive the whole stack (core,
// runtime, compiler, samples), unlike the report commands, which read only the store.
#pragma once

#include <string>
#include <vector>

namespace shardscope::cli {
// Runs a driver command (currently "run"); args exclude the program name and the command. Returns the exit code.
int RunDriverCommand(const std::string& command, const std::vector<std::string>& args);
std::string DriverHelp(const std::string& command); // "" when unknown
bool IsDriverCommand(const std::string& command);
// Driver commands run better with glibc's heap on transparent huge pages, a
// setting glibc reads only at process start (GLIBC_TUNABLES): re-executes the
// program with it added, once. Returns only when it does not re-execute
// (already set, SHARDSCOPE_HUGEPAGES=0, or exec failed).
void ReexecWithHugePages(char** argv);
// Whether this process runs with the huge-page heap (recorded with each run).
bool HugePageHeap();
}
