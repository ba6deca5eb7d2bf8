// `shardscope check DB` (see check.h): prints what store::CheckDatabase found.
#include "ui/cli/check.h"

#include "profiler/analysis/format.h"
#include "store/check.h"

namespace shardscope::cli {

const char kCheckHelp[] =
    "usage: shardscope check PATH\n"
    "  Checks that a database file is whole: SQLite's integrity check (pages, indexes),\n"
    "  then shardscope's own: the meta table and schema version, the tables and columns\n"
    "  every version has, references between tables (slices -> tracks and names,\n"
    "  compilations, executions and ops -> graphs, every row -> its run) and the runs'\n"
    "  status values. Lists each run and how it stands (finished, incomplete, running,\n"
    "  ended by the hang detector, ended abnormally). Exits 0 when the file is healthy,\n"
    "  1 when it is not.\n";

int RunCheckCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      out << kCheckHelp;
      return 0;
    }
  }
  if (args.size() != 1 || args[0].rfind("--", 0) == 0) {
    err << "error: " << (args.empty() ? "check needs the database PATH" : "check takes one PATH and no options")
        << "\n" << kCheckHelp;
    return 2;
  }
  store::CheckReport r = store::CheckDatabase(args[0]);
  // Names in the file (a run's workload, a damaged row's text) print as one
  // line each, their control characters escaped, as in every report.
  using analysis::Printable;
  if (r.healthy()) {
    out << Printable(r.path) << ": healthy\n";
  } else {
    out << Printable(r.path) << ": " << r.problems.size() << (r.problems.size() == 1 ? " problem" : " problems")
        << "\n";
    for (const std::string& p : r.problems) out << "  problem: " << Printable(p) << "\n";
  }
  for (const std::string& n : r.notes) out << "  note: " << Printable(n) << "\n";
  for (const std::string& run : r.runs) out << "  " << Printable(run) << "\n";
  return r.healthy() ? 0 : 1;
}

}  // namespace shardscope::cli
