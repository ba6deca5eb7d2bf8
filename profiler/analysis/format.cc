// Human formatting for reports (see format.h).
#include "profiler/analysis/format.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace shardscope::analysis {

namespace {
// Two or three significant digits: "4.1", "38", "250".
std::string Scaled(double v, const char* unit) {
  if (v < 10) return absl::StrFormat("%.1f %s", v, unit);
  return absl::StrFormat("%.0f %s", v, unit);
}
}  // namespace

std::string FormatNs(int64_t ns) {
  double v = static_cast<double>(ns);
  double a = v < 0 ? -v : v;
  if (ns == 0) return "0";  // reads better in a column than "0 ns"
  if (a < 1e3) return absl::StrFormat("%d ns", ns);
  if (a < 1e6) return Scaled(v / 1e3, "us");
  if (a < 1e9) return Scaled(v / 1e6, "ms");
  if (a < 60e9) return absl::StrFormat("%.2f s", v / 1e9);
  if (a < 3600e9) return absl::StrFormat("%.1f min", v / 60e9);
  return absl::StrFormat("%.1f h", v / 3600e9);
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrFormat("%d B", bytes);
  double v = static_cast<double>(bytes) / 1024;
  if (v < 1024) return Scaled(v, "KiB");
  v /= 1024;
  if (v < 1024) return Scaled(v, "MiB");
  return Scaled(v / 1024, "GiB");
}

std::string Plural(int64_t n, const std::string& one, const std::string& many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

std::string JoinFirst(const std::vector<std::string>& items, size_t shown) {
  if (items.size() <= shown) return absl::StrJoin(items, ", ");
  std::vector<std::string> first(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(shown));
  return absl::StrCat(absl::StrJoin(first, ", "), " and ", items.size() - shown, " more");
}

std::string Humanize(const std::string& snake) {
  std::string out = snake;
  std::replace(out.begin(), out.end(), '_', ' ');
  return out;
}

std::string Printable(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7F) {
      out += ch;
      continue;
    }
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: absl::StrAppendFormat(&out, "\\x%02x", c);
    }
  }
  return out;
}

std::string AlignTable(const std::vector<std::vector<std::string>>& table,
                       const std::string& indent, const std::vector<bool>& right) {
  std::vector<std::vector<std::string>> rows = table;
  for (auto& row : rows)
    for (std::string& cell : row) cell = Printable(cell);
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (row.size() > width.size()) width.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t c = 0; c < row.size(); ++c) {
      bool r = c < right.size() && right[c];
      std::string pad(width[c] - row[c].size(), ' ');
      line += r ? pad + row[c] : row[c] + (c + 1 < row.size() ? pad : "");
      if (c + 1 < row.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string HtmlText(std::string_view name) {
  return absl::StrReplaceAll(Printable(name), {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

std::string ShortSharding(std::string_view sharding) {
  const absl::string_view text(sharding.data(), sharding.size());  // absl's own on this Debian
  std::string out;
  size_t at = 0;
  while (true) {
    const size_t d = text.find("devices=[", at);
    if (d == absl::string_view::npos) break;
    const size_t close = text.find(']', d);
    if (close == absl::string_view::npos) break;
    absl::StrAppend(&out, text.substr(at, close + 1 - at));
    // The id list: digits and commas after the tile shape.
    size_t end = close + 1;
    while (end < text.size() && (absl::ascii_isdigit(text[end]) || text[end] == ',')) ++end;
    const std::vector<absl::string_view> ids = absl::StrSplit(text.substr(close + 1, end - close - 1), ',');
    bool iota = !ids.empty() && !ids[0].empty();
    for (size_t k = 0; iota && k < ids.size(); ++k) {
      int64_t v;
      iota = absl::SimpleAtoi(ids[k], &v) && v == static_cast<int64_t>(k);
    }
    if (iota && ids.size() > 16) {
      absl::StrAppend(&out, "<=[", ids.size(), "]");
    } else if (ids.size() > 32) {
      absl::StrAppend(&out, absl::StrJoin(ids.begin(), ids.begin() + 4, ","), ",...,", ids.back(), " (", ids.size(),
                      " chips)");
    } else {
      absl::StrAppend(&out, text.substr(close + 1, end - close - 1));
    }
    at = end;
  }
  absl::StrAppend(&out, text.substr(at));
  return out;
}

}  // namespace shardscope::analysis
