// Names from a database as reports print them (analysis/format.h).
#include "profiler/analysis/format.h"

#include <gtest/gtest.h>

#include <string>

namespace shardscope::analysis {
namespace {

TEST(Printable, EscapesWhatWouldChangeHowTheLineShows) {
  EXPECT_EQ(Printable("dot.3"), "dot.3");
  EXPECT_EQ(Printable("a\nb\r\t\x1b[2J\x7f"), "a\\nb\\r\\t\\x1b[2J\\x7f");
  // UTF-8 text stays; the C1 controls and invisible format characters do not.
  EXPECT_EQ(Printable("caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x99\x82 \xc2\xb5s"), "caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x99\x82 \xc2\xb5s");
  EXPECT_EQ(Printable("\xc2\x9b" "2J"), "\\u009b2J");
  EXPECT_EQ(Printable("layer\xe2\x80\xae" "1.fc"), "layer\\u202e1.fc");       // right-to-left override
  EXPECT_EQ(Printable("\xe2\x81\xa7x\xe2\x81\xa9"), "\\u2067x\\u2069");        // an isolate and its end
  EXPECT_EQ(Printable("a\xe2\x80\x8b" "b\xe2\x80\xa9"), "a\\u200bb\\u2029");   // zero width, paragraph separator
  EXPECT_EQ(Printable("\xd8\x9c"), "\\u061c");                                 // Arabic letter mark
  // Bytes that are not UTF-8, each escaped, the text after them kept.
  EXPECT_EQ(Printable("\xff" "ok"), "\\xffok");
  EXPECT_EQ(Printable("\xe2\x80" "x"), "\\xe2\\x80x");
  EXPECT_EQ(Printable("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(Printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(Printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
}

TEST(Printable, TablesAlignOnCharactersNotBytes) {
  const std::string t = AlignTable({{"caf\xc3\xa9", "1"}, {"cafe", "2"}, {"x", "3"}}, "");
  EXPECT_EQ(t, "caf\xc3\xa9  1\ncafe  2\nx     3\n");
}

// A CJK name takes two terminal columns a character (and a combining accent
// none), so its column lines up with the ASCII names below it.
TEST(Printable, TablesAlignWideAndCombiningCharactersAsATerminalDrawsThem) {
  const std::string t = AlignTable({{"\u6743\u91cd", "1"}, {"e\u0301", "2"}, {"wq", "3"}, {"abcd", "4"}}, "");
  EXPECT_EQ(t, "\u6743\u91cd  1\ne\u0301     2\nwq    3\nabcd  4\n");
  // A thumbs-up with a skin tone is one emoji, two columns; a rocket two.
  const std::string e = AlignTable({{"\U0001F44D\U0001F3FD", "1"}, {"\U0001F680", "2"}, {"abcd", "3"}}, "");
  EXPECT_EQ(e, "\U0001F44D\U0001F3FD    1\n\U0001F680    2\nabcd  3\n");
}

TEST(Printable, AVeryLongNameDoesNotWidenItsWholeTable) {
  std::string huge;
  for (int i = 0; i < 100000; ++i) huge += "\xc3\xa9";  // 100,000 characters, 200,000 bytes
  const std::string t = AlignTable({{huge, "1"}, {"x", "2"}}, "");
  EXPECT_LT(t.size(), 4200u);
  EXPECT_NE(t.find("... (100000 characters)  1\n"), std::string::npos);
  EXPECT_EQ(t.find("\xc3\n"), std::string::npos);  // cut between characters, not inside one
}

TEST(MarkdownWithoutHtml, NamesCannotBecomeHtml) {
  EXPECT_EQ(MarkdownWithoutHtml("| <img src=x onerror=alert(1)> | a & b |"),
            "| &lt;img src=x onerror=alert(1)> | a &amp; b |");
  EXPECT_EQ(MarkdownWithoutHtml("<details><summary>x</summary>"), "&lt;details>&lt;summary>x&lt;/summary>");
  // Code spans show their text as it is: left alone.
  EXPECT_EQ(MarkdownWithoutHtml("at `f<T>(a&b)` and <b>"), "at `f<T>(a&b)` and &lt;b>");
  EXPECT_EQ(MarkdownWithoutHtml("``a`<b>`` <c>"), "``a`<b>`` &lt;c>");
  // An unclosed backtick is text.
  EXPECT_EQ(MarkdownWithoutHtml("it`s <b>\n`x`"), "it`s &lt;b>\n`x`");
  // A fenced block is kept whole.
  EXPECT_EQ(MarkdownWithoutHtml("<a>\n```\n<b> & c\n```\n<d>"), "&lt;a>\n```\n<b> & c\n```\n&lt;d>");
  EXPECT_EQ(MarkdownWithoutHtml("p90 >= 10% -> ok"), "p90 >= 10% -> ok");
}

}  // namespace
// A value just below a unit's end printed as "1000 ms" (a report's header read
// "finished after 1000 ms"), and a negative one as "-250.0 us".
TEST(FormatNs, EachValuePrintsInTheUnitItRoundsTo) {
  EXPECT_EQ(FormatNs(999'700'000), "1.00 s");
  EXPECT_EQ(FormatNs(999'400'000), "999 ms");
  EXPECT_EQ(FormatNs(999'700), "1.0 ms");
  EXPECT_EQ(FormatNs(9'970'000), "10 ms");
  EXPECT_EQ(FormatNs(9'940'000), "9.9 ms");
  EXPECT_EQ(FormatNs(59'999'000'000), "1.0 min");
  EXPECT_EQ(FormatNs(-250'000), "-250 us");
  EXPECT_EQ(FormatNs(-4'100'000), "-4.1 ms");
  EXPECT_EQ(FormatNs(250'000), "250 us");
}


// A name of 200,000 characters (users name tensors as they like) is cut in an
// HTML report, saying how long it was: twelve such names made a report of
// 2.4 MB, over the 2 MB the report promises.
TEST(Format, HtmlTextCutsAHugeNameAndSaysItsLength) {
  const std::string huge(200000, 'n');
  const std::string html = HtmlText(huge);
  EXPECT_LT(html.size(), 2100u);
  EXPECT_NE(html.find("... (200000 characters)"), std::string::npos);
  EXPECT_EQ(HtmlText("a<b"), "a&lt;b");
  // Cut between characters, never inside one.
  std::string accents;
  for (int i = 0; i < 3000; ++i) accents += "\xc3\xa9";
  const std::string cut = HtmlText(accents);
  int cp = 0;
  for (size_t i = 0; i < cut.size(); i += static_cast<size_t>(DecodeUtf8(cut.substr(i), reinterpret_cast<uint32_t*>(&cp))))
    ASSERT_GT(DecodeUtf8(cut.substr(i), reinterpret_cast<uint32_t*>(&cp)), 0) << "at byte " << i;
}

}  // namespace shardscope::analysis
