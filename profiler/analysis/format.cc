// Human formatting for reports (see format.h).
#include "profiler/analysis/format.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace shardscope::analysis {

namespace {
// Two or three significant digits: "4.1", "38", "250". By the magnitude as
// printed: 9.97 is "10", not "10.0", and -250 is "-250", not "-250.0".
std::string Scaled(double v, const char* unit) {
  if (std::abs(v) < 9.95) return absl::StrFormat("%.1f %s", v, unit);
  return absl::StrFormat("%.0f %s", v, unit);
}
}  // namespace

std::string FormatNs(int64_t ns) {
  double v = static_cast<double>(ns);
  double a = v < 0 ? -v : v;
  if (ns == 0) return "0";  // reads better in a column than "0 ns"
  // Each unit up to what still prints below the next: 999.7 ms is "1.00 s", not "1000 ms".
  if (a < 1e3) return absl::StrFormat("%d ns", ns);
  if (a < 999.5e3) return Scaled(v / 1e3, "us");
  if (a < 999.5e6) return Scaled(v / 1e6, "ms");
  if (a < 59.995e9) return absl::StrFormat("%.2f s", v / 1e9);
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

bool IsInvisibleControl(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || (cp >= 0x200B && cp <= 0x200F) ||
         (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x2069) || cp == 0xFEFF ||
         (cp >= 0xFFF9 && cp <= 0xFFFB);
}

int DecodeUtf8(std::string_view s, uint32_t* cp) {
  if (s.empty()) return 0;
  const auto b = static_cast<unsigned char>(s[0]);
  if (b < 0x80) {
    *cp = b;
    return 1;
  }
  // The lead byte, the sequence's length and the range of its second byte.
  int need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  uint32_t v = 0;
  if (b >= 0xC2 && b <= 0xDF) need = 1, v = b & 0x1F;
  else if (b == 0xE0) need = 2, lo = 0xA0, v = b & 0x0F;
  else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) need = 2, v = b & 0x0F;
  else if (b == 0xED) need = 2, hi = 0x9F, v = b & 0x0F;
  else if (b == 0xF0) need = 3, lo = 0x90, v = b & 0x07;
  else if (b >= 0xF1 && b <= 0xF3) need = 3, v = b & 0x07;
  else if (b == 0xF4) need = 3, hi = 0x8F, v = b & 0x07;
  else return 0;
  if (s.size() < static_cast<size_t>(need) + 1) return 0;
  for (int i = 1; i <= need; ++i) {
    const auto c = static_cast<unsigned char>(s[static_cast<size_t>(i)]);
    if (c < (i == 1 ? lo : 0x80) || c > (i == 1 ? hi : 0xBF)) return 0;
    v = (v << 6) | (c & 0x3F);
  }
  *cp = v;
  return need + 1;
}

std::string ShortName(std::string_view name, size_t max) {
  if (name.size() <= max || max < 8) return std::string(name);
  // Its start (the kernel) and its end (what tells two instantiations apart).
  auto boundary = [&](size_t i) {  // not inside a character
    while (i > 0 && i < name.size() && (static_cast<unsigned char>(name[i]) & 0xC0) == 0x80) --i;
    return i;
  };
  const size_t head = boundary((max - 3) * 2 / 3);
  const size_t tail = boundary(name.size() - (max - 3 - head));
  return absl::StrCat(std::string(name.substr(0, head)), "...", std::string(name.substr(tail)));
}

std::string Printable(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (size_t i = 0; i < name.size();) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += name[i++];
      continue;
    }
    if (c >= 0x80) {
      uint32_t cp = 0;
      const int n = DecodeUtf8(name.substr(i), &cp);
      if (n == 0) {
        absl::StrAppendFormat(&out, "\\x%02x", c);
        ++i;
      } else {
        if (IsInvisibleControl(cp)) absl::StrAppendFormat(&out, "\\u%04x", cp);
        else out.append(name.substr(i, static_cast<size_t>(n)));
        i += static_cast<size_t>(n);
      }
      continue;
    }
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: absl::StrAppendFormat(&out, "\\x%02x", c);
    }
    ++i;
  }
  return out;
}

std::string MarkdownWithoutHtml(std::string_view md) {
  std::string out;
  out.reserve(md.size());
  for (size_t i = 0; i < md.size();) {
    if ((i == 0 || md[i - 1] == '\n') && md.substr(i, 3) == "```") {
      // A fenced block: kept as it is up to its closing fence (or the end).
      size_t end = md.find("\n```", i + 3);
      end = end == std::string_view::npos ? md.size() : std::min(md.find('\n', end + 1), md.size());
      out.append(md.substr(i, end - i));
      i = end;
      continue;
    }
    if (md[i] == '`') {
      // A code span: a run of backticks up to the same run on its line (CommonMark), kept as it is.
      size_t run = md.find_first_not_of('`', i);
      if (run == std::string_view::npos) run = md.size();
      const size_t n = run - i;
      const size_t line_end = std::min(md.find('\n', run), md.size());
      size_t close = std::string_view::npos;
      for (size_t j = run; j < line_end;) {
        const size_t k = md.find('`', j);
        if (k >= line_end) break;
        size_t e = md.find_first_not_of('`', k);
        if (e == std::string_view::npos) e = md.size();
        if (e - k == n) {
          close = k;
          break;
        }
        j = e;
      }
      if (close != std::string_view::npos) {
        out.append(md.substr(i, close + n - i));
        i = close + n;
        continue;
      }
      out.append(md.substr(i, n));
      i = run;
      continue;
    }
    if (md[i] == '<') out += "&lt;";
    else if (md[i] == '&') out += "&amp;";
    else out += md[i];
    ++i;
  }
  return out;
}

namespace {
// The columns a code point takes on a terminal: two for the East Asian wide
// and fullwidth blocks (CJK, Hangul, fullwidth forms, most emoji), none for
// combining marks, zero-width spaces and variation selectors, else one.
size_t CodePointColumns(uint32_t cp) {
  // Combining marks, zero-width spaces, variation selectors and emoji skin
  // tones (drawn into the emoji before them).
  if ((cp >= 0x0300 && cp <= 0x036F) || (cp >= 0x200B && cp <= 0x200F) || (cp >= 0xFE00 && cp <= 0xFE0F) ||
      (cp >= 0x1F3FB && cp <= 0x1F3FF))
    return 0;
  const bool wide = (cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0x303E) ||
                    (cp >= 0x3041 && cp <= 0x33FF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
                    (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0xA000 && cp <= 0xA4CF) ||
                    (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xF900 && cp <= 0xFAFF) ||
                    (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF60) ||
                    (cp >= 0xFFE0 && cp <= 0xFFE6) || (cp >= 0x1F300 && cp <= 0x1F64F) ||
                    (cp >= 0x1F680 && cp <= 0x1F6FF) || (cp >= 0x1F900 && cp <= 0x1F9FF) ||
                    (cp >= 0x1FA70 && cp <= 0x1FAFF) || (cp >= 0x20000 && cp <= 0x3FFFD);
  return wide ? 2 : 1;
}

// The columns a Printable cell takes on a terminal, so that a column of
// Chinese tensor names lines up with the ASCII ones.
size_t Columns(std::string_view cell) {
  size_t columns = 0;
  for (size_t i = 0; i < cell.size();) {
    const auto b = static_cast<unsigned char>(cell[i]);
    const size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
    uint32_t cp = len == 1 ? b : b & (0x7F >> len);
    size_t k = 1;
    for (; k < len && i + k < cell.size() && (static_cast<unsigned char>(cell[i + k]) & 0xC0) == 0x80; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(cell[i + k]) & 0x3F);
    columns += k == len ? CodePointColumns(cp) : 1;
    i += k;
  }
  return columns;
}
}  // namespace

namespace {
// `text` cut at about `max` characters (never inside a UTF-8 sequence), saying
// how long it was: one name of 100,000 would pad every row of a text table to
// that width, or make an HTML report of 2 MB. (The JSON forms keep the whole name.)
std::string CutLong(std::string text, size_t max) {
  const auto n = static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
  if (n <= max) return text;
  size_t cut = 0;
  for (size_t seen = 0; cut < text.size(); ++cut)
    if ((static_cast<unsigned char>(text[cut]) & 0xC0) != 0x80 && seen++ == max - 20) break;
  return absl::StrCat(text.substr(0, cut), "... (", n, " characters)");
}
}  // namespace

std::string AlignTable(const std::vector<std::vector<std::string>>& table,
                       const std::string& indent, const std::vector<bool>& right) {
  constexpr size_t kMaxCell = 1000;
  std::vector<std::vector<std::string>> rows = table;
  for (auto& row : rows)
    for (std::string& cell : row) cell = CutLong(Printable(cell), kMaxCell);
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (row.size() > width.size()) width.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], Columns(row[c]));
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t c = 0; c < row.size(); ++c) {
      bool r = c < right.size() && right[c];
      std::string pad(width[c] - Columns(row[c]), ' ');
      line += r ? pad + row[c] : row[c] + (c + 1 < row.size() ? pad : "");
      if (c + 1 < row.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string HtmlText(std::string_view name) {
  return absl::StrReplaceAll(CutLong(Printable(name), 2000),
                             {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
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
