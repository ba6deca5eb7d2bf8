// Terminal-safe output (see terminal.h).
#include "ui/cli/terminal.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "absl/strings/str_format.h"
#include "profiler/analysis/format.h"

namespace shardscope::cli {
namespace {

void EscapeByte(unsigned char b, std::string* out) {
  switch (b) {
    case '\r': *out += "\\r"; return;
    case '\b': *out += "\\b"; return;
    case '\f': *out += "\\f"; return;
    case '\v': *out += "\\v"; return;
    default: absl::StrAppendFormat(out, "\\x%02x", b);
  }
}

}  // namespace

void TerminalFilter::Flush(std::string* out) {
  for (char c : pending_) EscapeByte(static_cast<unsigned char>(c), out);
  pending_.clear();
  need_ = 0;
}

void TerminalFilter::Take(unsigned char b, std::string* out) {
  if (need_ > 0) {
    if (b >= lo_ && b <= hi_) {
      pending_ += static_cast<char>(b);
      lo_ = 0x80, hi_ = 0xBF;
      if (--need_ == 0) {
        // The C1 controls (U+009B is CSI) and the invisible format
        // characters (U+202E reverses the line): as \u escapes.
        uint32_t cp = 0;
        if (analysis::DecodeUtf8(pending_, &cp) > 0 && analysis::IsInvisibleControl(cp))
          absl::StrAppendFormat(out, "\\u%04x", cp);
        else
          *out += pending_;
        pending_.clear();
      }
      return;
    }
    Flush(out);  // the sequence broke off: not UTF-8; `b` starts afresh
  }
  if (b < 0x80) {
    if ((b < 0x20 && b != '\n' && b != '\t') || b == 0x7F) EscapeByte(b, out);
    else *out += static_cast<char>(b);
    return;
  }
  // A lead byte and the range of the byte after it (RFC 3629's table).
  int need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) need = 1;
  else if (b == 0xE0) need = 2, lo = 0xA0;
  else if (b >= 0xE1 && b <= 0xEC) need = 2;
  else if (b == 0xED) need = 2, hi = 0x9F;
  else if (b >= 0xEE && b <= 0xEF) need = 2;
  else if (b == 0xF0) need = 3, lo = 0x90;
  else if (b >= 0xF1 && b <= 0xF3) need = 3;
  else if (b == 0xF4) need = 3, hi = 0x8F;
  if (need == 0) {  // a stray continuation byte, or one UTF-8 never uses
    EscapeByte(b, out);
    return;
  }
  pending_ = std::string(1, static_cast<char>(b));
  need_ = need, lo_ = lo, hi_ = hi;
}

void TerminalFilter::Feed(std::string_view bytes, std::string* out) {
  for (char c : bytes) Take(static_cast<unsigned char>(c), out);
}

void TerminalFilter::Finish(std::string* out) { Flush(out); }

std::string TerminalSafe(std::string_view text) {
  TerminalFilter f;
  std::string out;
  f.Feed(text, &out);
  f.Finish(&out);
  return out;
}

TerminalSafeBuf::int_type TerminalSafeBuf::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  const char ch = traits_type::to_char_type(c);
  return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
}

std::streamsize TerminalSafeBuf::xsputn(const char* s, std::streamsize n) {
  buf_.clear();
  filter_.Feed(std::string_view(s, static_cast<size_t>(n)), &buf_);
  const auto len = static_cast<std::streamsize>(buf_.size());
  return dest_->sputn(buf_.data(), len) == len ? n : 0;
}

int TerminalSafeBuf::sync() {
  buf_.clear();
  filter_.Finish(&buf_);
  const auto len = static_cast<std::streamsize>(buf_.size());
  if (dest_->sputn(buf_.data(), len) != len) return -1;
  return dest_->pubsync();
}

void MakeStandardStreamsTerminalSafe() {
  // Never destroyed: the streams flush at exit, after main's locals are gone.
  static auto* out = new TerminalSafeBuf(std::cout.rdbuf());
  static auto* err = new TerminalSafeBuf(std::cerr.rdbuf());
  std::cout.rdbuf(out);
  std::cerr.rdbuf(err);
}

ProgressBar::ProgressBar(std::string_view what, bool enabled, int fd)
    : what_(TerminalSafe(what.size() > 40 ? what.substr(what.size() - 40) : what)), enabled_(enabled), fd_(fd) {}

void ProgressBar::Clear() {
  if (drew_) (void)!::write(fd_, "\r\x1b[2K", 5);
  drew_ = false;
}

void ProgressBar::Update(int64_t done, int64_t total) {
  if (!enabled_ || total <= 0) return;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const int64_t ns = int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
  if (drew_ && done < total && ns - last_draw_ns_ < 100'000'000) return;
  last_draw_ns_ = ns;
  drew_ = true;
  constexpr int kWidth = 30;
  const double f = std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0);
  const int filled = static_cast<int>(f * kWidth);
  char line[200];
  const int n = std::snprintf(line, sizeof line, "\r\x1b[2K%s  [%s%s] %3d%%  %lld/%lld", what_.c_str(),
                              std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(),
                              static_cast<int>(f * 100), static_cast<long long>(done), static_cast<long long>(total));
  if (n > 0) (void)!::write(fd_, line, std::min<size_t>(static_cast<size_t>(n), sizeof line - 1));
}

bool ProgressWanted(bool quiet) { return !quiet && isatty(STDERR_FILENO); }

}  // namespace shardscope::cli
