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
}
