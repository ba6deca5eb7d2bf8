// Human formatting shared by the analysis renderers: durations, byte sizes,
// cause kinds, and a column-aligned plain-text table.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::analysis {

std::string FormatNs(int64_t ns);        // "0", "850 ns", "12.5 us", "4.1 ms", "38 ms", "1.25 s", "2.5 min", "26.5 h"
std::string FormatBytes(int64_t bytes);  // "512 B", "98 KiB", "3.1 MiB"
std::string Humanize(const std::string& snake);  // "input_shape_changed" -> "input shape changed"
std::string Plural(int64_t n, const std::string& one, const std::string& many);  // "1 step", "4 steps"
// A list for a one-line verdict: the first `shown` items joined by ", ", then
// how many more ("a, b, c and 250 more"): a verdict stays one line however many
// suspects are flagged (the report's ranking lists them all).
std::string JoinFirst(const std::vector<std::string>& items, size_t shown);
// An HLO sharding as a report shows it: a tile assignment listing more than 16
// chips in order ("devices=[4096,1]0,1,...,4095") in XLA's iota form
// ("devices=[4096,1]<=[4096]"); any other list of more than 32 chips cut to
// its first four ids and last with the count ("0,2,4,6,...,4094 (2048 chips)").
std::string ShortSharding(std::string_view sharding);
// A name from the database as one line of text: control characters print as
// escapes ("\n", "\r", "\t", "\x1b", "\x7f"), so a stored name can neither
// break a report's lines nor drive the terminal; so do the C1 controls and
// the invisible format characters of Unicode ("\u009b", "\u202e": see
// IsInvisibleControl) and bytes that are not UTF-8 ("\xff"). Every table cell
// is printed so (AlignTable, Markdown cells), and each name the text
// renderers print outside a table.
std::string Printable(std::string_view name);
// Code points that change how the text around them shows without showing
// themselves: C1 controls, bidirectional embeddings, overrides, isolates and
// marks (a name holding U+202E prints the rest of its line reversed, as in
// "Trojan Source"), zero-width characters, line and paragraph separators.
bool IsInvisibleControl(uint32_t cp);
// Decodes the UTF-8 sequence at the start of `s` (RFC 3629: no overlongs, no
// surrogates): its length and code point, or 0 when it is not one.
int DecodeUtf8(std::string_view s, uint32_t* cp);
// Markdown whose text cannot turn into HTML: outside code spans, "<" and "&"
// become entities (a rendered page shows them as they were).
std::string MarkdownWithoutHtml(std::string_view md);
// The same, escaped for HTML text and attribute values (& < > ").
std::string HtmlText(std::string_view name);

// A name cut to about `max` bytes (at characters' starts), its start and end
// kept around "...": a CUDA kernel's name is its whole C++ signature, often
// 300-900 characters, which would widen a table's column past any screen; its
// end tells two instantiations of one template apart. JSON keeps names whole.
std::string ShortName(std::string_view name, size_t max = 96);

// Pads columns to a common width (of the cells as Printable shows them); numeric-looking columns could be right aligned
// by the caller's choice in `right` (one flag per column, may be shorter).
std::string AlignTable(const std::vector<std::vector<std::string>>& rows,
                       const std::string& indent, const std::vector<bool>& right = {});

}  // namespace shardscope::analysis
