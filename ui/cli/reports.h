// Report commands of the CLI (report, query): they read only the store, so they
// work on any stored run. main.cc dispatches to them; tests call them directly.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace shardscope::cli {

bool IsReportCommand(const std::string& command);
// One line per report command, for `shardscope --help`.
std::string ReportCommandSummaries();
std::string ReportHelp(const std::string& command);  // "" when unknown
// Runs a report command; args exclude the program name and the command.
// Returns the exit code: 0 ok, 1 the file or query failed, 2 bad arguments.
int RunReportCommand(const std::string& command, const std::vector<std::string>& args,
                     std::ostream& out, std::ostream& err);

}  // namespace shardscope::cli
