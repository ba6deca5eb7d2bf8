// Output that cannot drive the terminal. Names in a database (tensors, files,
// call sites, cause details, samples) are whatever the program that recorded
// them made, and a name holding "\x1b[2J" must print as those characters, not
// clear the screen. Everything the CLI writes to std::cout and std::cerr goes
// through TerminalSafeBuf (main.cc installs it), the one place output is
// produced: control characters other than newline and tab print as visible
// escapes (\x1b, \r, \x7f), as do the C1 controls in UTF-8 (\u009b), the
// invisible format characters (\u202e: analysis::IsInvisibleControl) and bytes
// that are not UTF-8 (\xff). Newlines pass: the renderers escape those inside
// names (analysis::Printable).
#pragma once

#include <cstdint>
#include <streambuf>
#include <string>
#include <string_view>

namespace shardscope::cli {

// A byte stream's escaping, one byte at a time (a UTF-8 sequence may arrive in pieces).
class TerminalFilter {
 public:
  // Appends the escaped form of `bytes` to `out`; an unfinished UTF-8 sequence waits for the next call.
  void Feed(std::string_view bytes, std::string* out);
  // Ends the stream: an unfinished sequence is not UTF-8, and is escaped.
  void Finish(std::string* out);

 private:
  void Take(unsigned char b, std::string* out);
  void Flush(std::string* out);  // the pending bytes, escaped
  std::string pending_;          // a UTF-8 sequence begun
  int need_ = 0;                 // continuation bytes it still needs
  unsigned char lo_ = 0x80, hi_ = 0xBF;  // the range of its next byte (overlong, surrogate checks)
};

// The whole of `text`, escaped.
std::string TerminalSafe(std::string_view text);

// A streambuf writing escaped bytes to `dest` (not owned).
class TerminalSafeBuf : public std::streambuf {
 public:
  explicit TerminalSafeBuf(std::streambuf* dest) : dest_(dest) {}

 protected:
  int_type overflow(int_type c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;  // a flush ends any unfinished sequence

 private:
  std::streambuf* dest_;
  TerminalFilter filter_;
  std::string buf_;
};

// Points std::cout and std::cerr at TerminalSafeBufs for the rest of the process.
void MakeStandardStreamsTerminalSafe();

// A one-line progress bar for a long command ("replaying run 3  [#####.....]  45%
// 120/266"), drawn on `fd` at most ten times a second and cleared when done.
// Only where the user watches: the caller enables it when stderr is a terminal
// and the command is not --quiet (ProgressWanted), so pipes and logs get nothing.
class ProgressBar {
 public:
  ProgressBar(std::string_view what, bool enabled, int fd = 2);
  ~ProgressBar() { Clear(); }
  void Update(int64_t done, int64_t total);
  // Clears the line it drew (before the command prints its result).
  void Clear();

 private:
  std::string what_;
  bool enabled_;
  int fd_;
  bool drew_ = false;
  int64_t last_draw_ns_ = 0;
};

// Whether a command should draw progress: not --quiet, and stderr a terminal.
bool ProgressWanted(bool quiet);

}  // namespace shardscope::cli
