// `shardscope check`: is a database file whole? SQLite's integrity check, then
// shardscope's own: meta and schema version, the tables and columns every
// version has had, references between tables (slices -> tracks and names,
// compilations/executions/ops -> graphs, every row -> its run), runs' status
// values. Reads only; never refuses a file, it reports what is wrong with it.
#pragma once

#include <string>
#include <vector>

namespace shardscope::store {

struct CheckReport {
  std::string path;
  std::vector<std::string> problems;  // each makes the file unhealthy
  std::vector<std::string> notes;     // worth knowing, not damage (e.g. a killed run's cut-off tail)
  std::vector<std::string> runs;      // "run 1: mlp, finished", one per run
  bool healthy() const { return problems.empty(); }
};

CheckReport CheckDatabase(const std::string& path);

}  // namespace shardscope::store
