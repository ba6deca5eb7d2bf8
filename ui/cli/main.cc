// Entry point of the `shardscope` CLI: dispatches to report commands (which read
// only the store) and driver commands (which run the stack). Exit codes: 0 ok,
// 1 a command failed (bad file, bad query), 2 bad usage, 3 a gate tripped
// (diff --fail-if-slower).
#include <iostream>
#include <string>
#include <vector>

#include "ui/cli/check.h"
#include "ui/cli/drivers.h"
#include "ui/cli/reports.h"
#include "ui/cli/terminal.h"

#ifndef SHARDSCOPE_VERSION
#define SHARDSCOPE_VERSION "dev"
#endif

namespace {

std::string Usage() {
  std::string s =
      "shardscope " SHARDSCOPE_VERSION " — see inside a sharded ML stack; every run lands in one SQLite file\n"
      "\n"
      "usage: shardscope <command> [args]   (shardscope <command> --help for details)\n"
      "\n"
      "commands:\n";
  if (shardscope::cli::IsDriverCommand("run")) {
    s += "  run SAMPLE      run a sample workload and record it (e.g. run mlp --db run.db)\n";
    s += "  replay PATH     re-execute a stored run on this build and compare it with the stored one\n"
         "                  (--modeled --profile h100 --topology gpu:4x8: re-simulate it elsewhere)\n";
    s += "  calibrate       measure this machine's `cpu` chip profile and cache it (--show: the values in use)\n";
  }
  s += shardscope::cli::ReportCommandSummaries();
  s += "  check PATH      is the file whole? SQLite's integrity check and shardscope's own\n";
  s += "\n"
       "exit codes: 0 ok, 1 the command failed (a file or run that cannot be read, a\n"
       "failed run), 2 bad usage (an unknown command, option or value), 3 a gate tripped\n"
       "(diff --fail-if-slower)\n";
  return s;
}

bool IsHelp(const std::string& a) { return a == "--help" || a == "-h" || a == "help"; }

}  // namespace

int main(int argc, char** argv) {
  using namespace shardscope::cli;
  // No byte of a stored name, a file name or an argument drives the terminal.
  MakeStandardStreamsTerminalSafe();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << Usage();
    return 2;
  }
  std::string cmd = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (IsHelp(cmd)) {
    // `shardscope help report` shows that command's help.
    if (!rest.empty()) {
      std::string h = rest[0] == "check"           ? std::string(kCheckHelp)
                      : IsReportCommand(rest[0]) ? ReportHelp(rest[0])
                                                 : DriverHelp(rest[0]);
      if (h.empty()) {
        std::cerr << "error: unknown command '" << rest[0] << "'\n" << Usage();
        return 2;
      }
      std::cout << h;
      return 0;
    }
    std::cout << Usage();
    return 0;
  }
  if (cmd == "--version") {
    std::cout << "shardscope " SHARDSCOPE_VERSION "\n";
    return 0;
  }
  if (cmd == "check") return RunCheckCommand(rest, std::cout, std::cerr);
  if (IsReportCommand(cmd)) return RunReportCommand(cmd, rest, std::cout, std::cerr);
  if (IsDriverCommand(cmd)) {
    for (const std::string& a : rest) {
      if (a == "--help" || a == "-h") {
        std::cout << DriverHelp(cmd);
        return 0;
      }
    }
    ReexecWithHugePages(argv);
    return RunDriverCommand(cmd, rest);
  }
  std::cerr << "error: unknown command '" << cmd << "'; run 'shardscope --help' for the list\n";
  return 2;
}
