// The CLI's shared pieces: numeric flag parsing (ranges, overflow, NaN) and
// the terminal-safe output filter (control characters, C1 controls, bytes
// that are not UTF-8, sequences split across writes).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <sstream>
#include <string>

#include "ui/cli/flags.h"
#include "ui/cli/terminal.h"

namespace shardscope::cli {
namespace {

TEST(ParseIntFlag, AcceptsTheRangeAndItsEnds) {
  EXPECT_EQ(*ParseIntFlag("--steps", "1", 1, 10), 1);
  EXPECT_EQ(*ParseIntFlag("--steps", "10", 1, 10), 10);
  EXPECT_EQ(*ParseIntFlag("--change-step", "-1", -1, 10), -1);
  EXPECT_EQ(*ParseIntFlag("--seed", "9223372036854775807", 0, INT64_MAX), INT64_MAX);
}

TEST(ParseIntFlag, RefusesWhatIsOutsideOrNotANumber) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"0", "--steps '0' is out of range (allowed 1..10000000)"},
      {"-1", "--steps '-1' is out of range (allowed 1..10000000)"},
      {"10000001", "--steps '10000001' is out of range (allowed 1..10000000)"},
      {"2147483648", "--steps '2147483648' is out of range (allowed 1..10000000)"},
      {"4294967297", "--steps '4294967297' is out of range (allowed 1..10000000)"},
      {"9223372036854775808", "--steps '9223372036854775808' is out of range (allowed 1..10000000)"},
      {"-9223372036854775809", "--steps '-9223372036854775809' is out of range (allowed 1..10000000)"},
      {"", "--steps '' is not an integer (allowed 1..10000000)"},
      {"-", "--steps '-' is not an integer (allowed 1..10000000)"},
      {"+5", "--steps '+5' is not an integer (allowed 1..10000000)"},
      {" 5", "--steps ' 5' is not an integer (allowed 1..10000000)"},
      {"5 ", "--steps '5 ' is not an integer (allowed 1..10000000)"},
      {"1e3", "--steps '1e3' is not an integer (allowed 1..10000000)"},
      {"0x10", "--steps '0x10' is not an integer (allowed 1..10000000)"},
      {"3.0", "--steps '3.0' is not an integer (allowed 1..10000000)"},
  };
  for (const Case& c : cases) {
    auto v = ParseIntFlag("--steps", c.text, 1, 10'000'000);
    ASSERT_FALSE(v.ok()) << "'" << c.text << "' parsed as " << *v;
    EXPECT_EQ(v.status().message(), c.message);
  }
  // A long value is cut short in the message.
  auto v = ParseIntFlag("--steps", std::string(1000, '9'), 1, 10);
  ASSERT_FALSE(v.ok());
  EXPECT_LT(v.status().message().size(), 150u) << v.status();
}

TEST(ParsePositiveRealFlag, RefusesNanInfinityAndTheRangesEnds) {
  EXPECT_DOUBLE_EQ(*ParsePositiveRealFlag("--lr", "0.05", "LR", 0, 100), 0.05);
  EXPECT_DOUBLE_EQ(*ParsePositiveRealFlag("--lr", "100", "LR", 0, 100), 100);
  EXPECT_DOUBLE_EQ(*ParsePositiveRealFlag("--lr", "1e-3", "LR", 0, 100), 1e-3);
  for (const char* bad : {"nan", "NaN", "-nan", "inf", "-inf", "infinity", "1e999"}) {
    auto v = ParsePositiveRealFlag("--lr", bad, "LR", 0, 100);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_NE(v.status().message().find(std::string("--lr '") + bad + "' is not a"), std::string::npos) << v.status();
    EXPECT_NE(v.status().message().find("(allowed 0 < LR <= 100)"), std::string::npos) << v.status();
  }
  for (const char* bad : {"0", "-0.1", "100.5", "1e3"})
    EXPECT_EQ(ParsePositiveRealFlag("--lr", bad, "LR", 0, 100).status().message(),
              std::string("--lr '") + bad + "' is out of range (allowed 0 < LR <= 100)");
  for (const char* bad : {"", "x", "0.1x", " 0.1", "0.1 "})
    EXPECT_EQ(ParsePositiveRealFlag("--lr", bad, "LR", 0, 100).status().message(),
              std::string("--lr '") + bad + "' is not a number (allowed 0 < LR <= 100)");
}

TEST(ParseStepWindowFlag, ClosedAndOpenWindows) {
  using W = std::pair<int64_t, int64_t>;
  EXPECT_EQ(*ParseStepWindowFlag("--trace-steps", "10:20", 100), W(10, 20));
  EXPECT_EQ(*ParseStepWindowFlag("--trace-steps", "3:3", 100), W(3, 3));
  EXPECT_EQ(*ParseStepWindowFlag("--trace-steps", "10:", 100), W(10, -1));
  EXPECT_EQ(*ParseStepWindowFlag("--trace-steps", ":20", 100), W(0, 20));
  EXPECT_EQ(*ParseStepWindowFlag("--trace-steps", "0:100", 100), W(0, 100));
}

TEST(ParseStepWindowFlag, RefusesWhatIsNotAWindow) {
  auto message = [](const std::string& text) {
    return std::string(ParseStepWindowFlag("--trace-steps", text, 100).status().message());
  };
  EXPECT_EQ(message("5:2"), "--trace-steps '5:2': the first step 5 is after the last 2 (N:M keeps steps N to M)");
  for (const char* bad : {"5", ":", "", "1:2:3", "1-2"})
    EXPECT_EQ(message(bad), std::string("--trace-steps '") + bad +
                                "' is not a window of steps: N:M (N to M, inclusive), N: or :M")
        << bad;
  EXPECT_EQ(message("x:2"), "--trace-steps x:2: N 'x' is not an integer (allowed 0..100)");
  EXPECT_EQ(message("1:101"), "--trace-steps 1:101: M '101' is out of range (allowed 0..100)");
  EXPECT_EQ(message("-1:2"), "--trace-steps -1:2: N '-1' is out of range (allowed 0..100)");
}

TEST(TerminalSafe, EscapesControlsKeepsTextNewlinesAndUtf8) {
  EXPECT_EQ(TerminalSafe("plain text\twith tab\n"), "plain text\twith tab\n");
  EXPECT_EQ(TerminalSafe("a\x1b[2Jb"), "a\\x1b[2Jb");
  EXPECT_EQ(TerminalSafe("title\x1b]0;pwned\x07"), "title\\x1b]0;pwned\\x07");
  EXPECT_EQ(TerminalSafe("over\rwrite"), "over\\rwrite");
  EXPECT_EQ(TerminalSafe(std::string("nul\0byte", 8)), "nul\\x00byte");
  EXPECT_EQ(TerminalSafe("del\x7f"), "del\\x7f");
  // UTF-8 text passes; U+009B (CSI, C1) does not; neither do bytes that are not UTF-8.
  EXPECT_EQ(TerminalSafe("caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x99\x82"), "caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x99\x82");
  EXPECT_EQ(TerminalSafe("\xc2\x9b" "2J"), "\\u009b2J");
  EXPECT_EQ(TerminalSafe("\xc2\x85"), "\\u0085");
  EXPECT_EQ(TerminalSafe("\xc2\xa0"), "\xc2\xa0");  // U+00A0 is text
  EXPECT_EQ(TerminalSafe("\x9b" "2J"), "\\x9b2J");
  EXPECT_EQ(TerminalSafe("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(TerminalSafe("\xc0\xaf"), "\\xc0\\xaf");            // overlong '/'
  EXPECT_EQ(TerminalSafe("\xed\xa0\x80"), "\\xed\\xa0\\x80");    // a surrogate
  EXPECT_EQ(TerminalSafe("\xe2\x80" "x"), "\\xe2\\x80x");        // cut short
  EXPECT_EQ(TerminalSafe("end\xe2\x80"), "end\\xe2\\x80");       // cut short at the end
  EXPECT_EQ(TerminalSafe("\xe2\x1b"), "\\xe2\\x1b");              // ESC breaks a sequence, escaped itself
  // Invisible format characters: a right-to-left override would print the
  // rest of the line reversed, a line separator break it.
  EXPECT_EQ(TerminalSafe("fn\xe2\x80\xae" "cod.exe"), "fn\\u202ecod.exe");
  EXPECT_EQ(TerminalSafe("a\xe2\x81\xa6" "b\xe2\x81\xa9"), "a\\u2066b\\u2069");
  EXPECT_EQ(TerminalSafe("a\xe2\x80\xa8" "b"), "a\\u2028b");
  EXPECT_EQ(TerminalSafe("\xef\xbb\xbf" "x"), "\\ufeffx");
}

TEST(TerminalSafeBuf, AStreamSplitAnywhereComesOutTheSame) {
  const std::string text = "name \x1b[2J caf\xc3\xa9 \xc2\x9b \xe2\x80\x94 \xf0\x9f\x99\x82 \x9b end\n";
  const std::string want = TerminalSafe(text);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    std::ostringstream sink;
    TerminalSafeBuf buf(sink.rdbuf());
    std::ostream out(&buf);
    out << text.substr(0, cut);
    out.write(text.data() + cut, static_cast<std::streamsize>(text.size() - cut));
    out.flush();
    EXPECT_EQ(sink.str(), want) << "split at " << cut;
  }
  // Character by character, as std::ostream::put writes.
  std::ostringstream sink;
  TerminalSafeBuf buf(sink.rdbuf());
  std::ostream out(&buf);
  for (char c : text) out.put(c);
  out.flush();
  EXPECT_EQ(sink.str(), want);
}

// What a progress bar wrote to a pipe while `draw` ran.
std::string BarOutput(bool enabled, const std::function<void(ProgressBar&)>& draw) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  {
    ProgressBar bar("replaying run \x1b[2J1", enabled, fds[1]);
    draw(bar);
  }
  close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  return out;
}

TEST(ProgressBar, DrawsWhereEnabledAndClearsItsLine) {
  const std::string out = BarOutput(true, [](ProgressBar& b) {
    b.Update(0, 4);
    b.Update(4, 4);  // the last update always draws
  });
  EXPECT_NE(out.find("[..............................]   0%  0/4"), std::string::npos) << out;
  EXPECT_NE(out.find("[##############################] 100%  4/4"), std::string::npos) << out;
  // The label cannot drive the terminal; the line is cleared at the end.
  EXPECT_NE(out.find("replaying run \\x1b[2J1"), std::string::npos) << out;
  EXPECT_EQ(out.substr(out.size() - 5), "\r\x1b[2K");
}

TEST(ProgressBar, WritesNothingWhenDisabled) {
  EXPECT_EQ(BarOutput(false, [](ProgressBar& b) { b.Update(1, 2); }), "");
  EXPECT_FALSE(ProgressWanted(/*quiet=*/true));
}

}  // namespace
}  // namespace shardscope::cli
