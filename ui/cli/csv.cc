// CSV writing for query results (see csv.h).
#include "ui/cli/csv.h"

namespace shardscope::cli {

std::string CsvField(const std::string& s) {
  if (!s.empty() && s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string ToCsv(const store::QueryResult& r) {
  std::string out;
  for (size_t c = 0; c < r.columns.size(); ++c) {
    if (c) out += ',';
    out += CsvField(r.columns[c]);
  }
  out += '\n';
  for (const auto& row : r.rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      if (c) out += ',';
      if (row[c]) out += CsvField(*row[c]);
    }
    out += '\n';
  }
  return out;
}

}  // namespace shardscope::cli
