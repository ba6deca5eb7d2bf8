// See trace_json.h.
#include "store/trace_json.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <algorithm>
#include <cstring>
#include <istream>
#include <limits>
#include <streambuf>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "store/trace_xspace.h"

namespace shardscope::store::internal {

void TraceEvent::Clear() {
  flags = 0;
  ph.clear(); name.clear(); cat.clear();
  has_name = false;
  pid = JsonId{}; tid = JsonId{};
  ts_state = dur_state = Num::kAbsent;
  ts_ns = dur_ns = 0;
  id.clear(); has_id = false;
  bp.clear(); scope.clear(); bind_id.clear();
  flow_in = flow_out = false;
  correlation = device = stream = seq = in_nelems = out_nelems = bytes = sort_index = step_num = -1;
  pg_name.clear(); pg_ranks.clear(); collective_name.clear(); dtype.clear(); arg_name.clear(); labels.clear();
  numbers.clear();
  grid.clear(); block.clear(); input_dims.clear(); input_types.clear();
  external_id = device_ordinal = -1;
  xla_run_id = 0;
  has_xla_run_id = bad_run_id = false;
  hlo_op.clear(); hlo_module.clear();
  slice_kind.clear();
  step = wait_ns = -1;
  non_numeric_args = 0;
  keys = 0;
}

bool MicrosTextToNs(std::string_view t, int64_t* ns) {
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && (t[i] == '-' || t[i] == '+')) neg = t[i++] == '-';
  int64_t whole = 0;
  int digits = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
    if (whole > 400000000000000000 / 10) return false;
    whole = whole * 10 + (t[i++] - '0');
    ++digits;
  }
  int64_t frac_ns = 0;  // the first three fraction digits; the fourth rounds
  int frac_digits = 0;
  bool round_up = false;
  if (i < t.size() && t[i] == '.') {
    ++i;
    for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i, ++frac_digits) {
      if (frac_digits < 3) frac_ns = frac_ns * 10 + (t[i] - '0');
      else if (frac_digits == 3) round_up = t[i] >= '5';
    }
  }
  for (int k = std::min(frac_digits, 3); k < 3; ++k) frac_ns *= 10;
  if (digits == 0 && frac_digits == 0) return false;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    // Exponent notation: rare in traces; exact enough through long double.
    std::string s(t);
    char* end = nullptr;
    errno = 0;
    long double v = std::strtold(s.c_str(), &end);
    if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(static_cast<double>(v))) return false;
    v *= 1000;
    if (std::fabs(static_cast<double>(v)) > 4e18) return false;
    *ns = static_cast<int64_t>(std::llroundl(v));  // long double: a double would lose the last digits of 1.7e18 ns
    return true;
  }
  if (i != t.size()) return false;
  if (whole > 4000000000000000) return false;  // 4e15 us: about 126 years
  int64_t v = whole * 1000 + frac_ns + (round_up ? 1 : 0);
  *ns = neg ? -v : v;
  return true;
}

namespace {

// Bytes of the file in pieces, inflated when it is gzip (several members are
// read one after another, as gzip -d does). Stops, keeping what came before,
// at damaged compressed data or a member cut short.
class TraceInput : public std::streambuf {
 public:
  ~TraceInput() override {
    if (z_init_) inflateEnd(&zs_);
    if (fd_ >= 0) ::close(fd_);
  }

  absl::Status Open(const std::string& path, const std::string& head, int fd, uint64_t size) {
    path_ = path;
    fd_ = fd;
    file_bytes_ = size;
    in_.resize(kPiece);
    out_.resize(kPiece);
    gzip_ = head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x1f &&
            static_cast<unsigned char>(head[1]) == 0x8b;
    if (gzip_) {
      std::memset(&zs_, 0, sizeof zs_);
      if (inflateInit2(&zs_, 15 + 16) != Z_OK) return absl::InternalError("zlib: inflateInit2 failed");
      z_init_ = true;
    }
    setg(out_.data(), out_.data(), out_.data());
    return absl::OkStatus();
  }

  // Bytes as they are (an XSpace protobuf): none of the repairs that keep a
  // JSON parser going. Set before the first read.
  void set_binary() { binary_ = true; }
  bool gzip() const { return gzip_; }
  uint64_t file_read() const { return file_read_; }
  // Uncompressed bytes handed to the parser so far.
  uint64_t consumed() const { return out_total_ - static_cast<uint64_t>(egptr() - gptr()); }
  bool at_end() const { return ended_; }
  bool damaged() const { return !damage_.empty(); }
  const std::string& damage() const { return damage_; }
  const std::string& damage_stat() const { return damage_stat_; }
  const std::string& io_error() const { return io_error_; }
  bool trailing_garbage() const { return trailing_garbage_; }
  // Reads (and drops) the rest of the input, so a gzip's damage or checksum
  // is seen.
  void Drain() {
    while (underflow() != traits_type::eof()) setg(eback(), egptr(), egptr());
  }
  int64_t lone_surrogates() const { return lone_surrogates_; }
  int64_t bad_utf8() const { return bad_utf8_; }
  int64_t non_finite() const { return non_finite_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (ended_) return traits_type::eof();
    size_t ready = 0;
    for (bool last = false; ready == 0 && !last;) {
      // The bytes held back last time (an escape that may go on) come first.
      const size_t keep = carry_.size();
      std::memcpy(out_.data(), carry_.data(), keep);
      carry_.clear();
      size_t n = gzip_ ? Inflate(keep) : ReadRaw(out_.data() + keep, out_.size() - keep);
      last = n == 0;
      n += keep;
      if (binary_) {
        ready = n;
        break;
      }
      ready = FixLoneSurrogates(out_.data(), n, last);
      ready -= last ? 0 : Utf8IncompleteTail(out_.data(), ready);  // its sequence goes on in the next piece
      ready -= last ? 0 : WordTail(out_.data(), ready);  // a bare word (NaN?) may go on in the next piece
      carry_.assign(out_.data() + ready, n - ready);
      ready = FixUtf8(ready);
    }
    if (ready == 0) {
      ended_ = true;
      return traits_type::eof();
    }
    char* data = out_.data();
    if (!binary_ && FixNonFinite(out_.data(), ready)) {
      data = fixed_.data();
      ready = fixed_.size();
    }
    out_total_ += ready;
    setg(data, data, data + ready);
    return traits_type::to_int_type(*gptr());
  }

 private:
  bool binary_ = false;
  static constexpr size_t kPiece = 256 << 10;

  size_t ReadRaw(char* buf, size_t cap) {
    for (;;) {
      ssize_t n = ::read(fd_, buf, cap);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        io_error_ = std::strerror(errno);
        return 0;
      }
      file_read_ += static_cast<uint64_t>(n);
      return static_cast<size_t>(n);
    }
  }

  // Python's json writes a lone UTF-16 surrogate ("\ud800", from a string
  // that held an undecodable byte) that no JSON parser accepts: one such
  // name would refuse the whole file. Each lone surrogate escape becomes
  // U+FFFD in place (same length) and is counted. Returns how many of the
  // `n` bytes are ready; the rest (an escape that may go on in the next
  // piece) are held back, unless `last`.
  size_t FixLoneSurrogates(char* b, size_t n, bool last) {
    auto hex = [&](size_t at, uint32_t* v) {
      *v = 0;
      for (size_t k = at; k < at + 4; ++k) {
        const char c = b[k];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return false;
        *v = *v * 16 + static_cast<uint32_t>(d);
      }
      return true;
    };
    auto escape_at = [&](size_t at, uint32_t* v) {  // "\uXXXX" at b[at], whole in the piece
      return at + 6 <= n && b[at] == '\\' && b[at + 1] == 'u' && hex(at + 2, v);
    };
    bool esc = false;
    for (size_t i = 0; i < n; ++i) {
      if (!esc) {
        esc = b[i] == '\\';
        continue;
      }
      esc = false;
      if (b[i] != 'u') continue;
      const size_t at = i - 1;
      if (!last && at + 12 > n) return at;  // the escape, or its pair, may go on in the next piece
      uint32_t v = 0, w = 0;
      if (!escape_at(at, &v)) continue;  // the parser says what is wrong with it
      if (v >= 0xD800 && v <= 0xDBFF && escape_at(at + 6, &w) && w >= 0xDC00 && w <= 0xDFFF) {
        i = at + 11;  // a proper pair
        continue;
      }
      if (v >= 0xD800 && v <= 0xDFFF) {
        std::memcpy(b + at + 2, "fffd", 4);
        ++lone_surrogates_;
      }
      i = at + 5;
    }
    return esc && !last ? n - 1 : n;  // a backslash at the end: its escape goes on
  }

  // How many bytes at the end of b[0..n) are letters or a minus sign: a bare
  // word that may go on in the next piece (all of them is none: a word that
  // long is not a number's).
  static size_t WordTail(const char* b, size_t n) {
    size_t k = 0;
    while (k < n && k < 16 && (absl::ascii_isalpha(static_cast<unsigned char>(b[n - 1 - k])) || b[n - 1 - k] == '-'))
      ++k;
    return k == n || k == 16 ? 0 : k;
  }

  // Python's json writes NaN, Infinity and -Infinity, and other writers inf
  // and nan (Kineto's "memory bandwidth (GB/s)": inf of a zero-length copy),
  // which no JSON parser accepts: one such value would refuse the whole file.
  // Outside strings each becomes null, counted (a field that needs a number
  // then says so). Returns whether any was replaced; the piece is then in
  // fixed_. The string state carries from piece to piece.
  bool FixNonFinite(const char* b, size_t n) {
    bool any = false;
    size_t copied = 0;
    for (size_t i = 0; i < n; ++i) {
      const char c = b[i];
      if (in_string_) {
        if (escaped_) escaped_ = false;
        else if (c == '\\') escaped_ = true;
        else if (c == '"') in_string_ = false;
        continue;
      }
      if (c == '"') {
        in_string_ = true;
        continue;
      }
      const bool minus = c == '-' && i + 1 < n && absl::ascii_isalpha(static_cast<unsigned char>(b[i + 1]));
      if (!minus && !absl::ascii_isalpha(static_cast<unsigned char>(c))) continue;
      size_t end = i + (minus ? 1 : 0);
      while (end < n && absl::ascii_isalpha(static_cast<unsigned char>(b[end]))) ++end;
      std::string word(b + i + (minus ? 1 : 0), end - i - (minus ? 1 : 0));
      absl::AsciiStrToLower(&word);
      if (word == "nan" || word == "inf" || word == "infinity") {
        if (!any) fixed_.clear();
        any = true;
        fixed_.append(b + copied, i - copied);
        fixed_.append("null");
        copied = end;
        ++non_finite_;
      }
      i = end - 1;
    }
    if (any) fixed_.append(b + copied, n - copied);
    return any;
  }

  // The length of a well-formed UTF-8 sequence starting at b[0..n), 0 when
  // ill-formed (RFC 3629: no overlongs, surrogates or code points past
  // U+10FFFF), -1 when cut short by the end.
  static int Utf8Sequence(const unsigned char* b, size_t n) {
    const unsigned char c = b[0];
    if (c < 0x80) return 1;
    int len;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if (c == 0xED) len = 3, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) len = 3;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c == 0xF4) len = 4, hi = 0x8F;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else return 0;
    for (int k = 1; k < len; ++k) {
      if (static_cast<size_t>(k) >= n) return -1;
      const unsigned char x = b[k];
      if (k == 1 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF)) return 0;
    }
    return len;
  }

  // Bytes at the end of b[0..n) that begin a sequence the piece cuts short.
  static size_t Utf8IncompleteTail(const char* b, size_t n) {
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
      const auto* p = reinterpret_cast<const unsigned char*>(b + n - back);
      if ((*p & 0xC0) != 0x80) return Utf8Sequence(p, back) == -1 ? back : 0;
    }
    return 0;
  }

  // A byte that is not UTF-8 (a C tool's Latin-1 kernel name) refused the
  // whole file; each becomes U+FFFD, as viewers show it, and is counted.
  // Returns the piece's new length (out_ grows when needed).
  size_t FixUtf8(size_t n) {
    const auto* b = reinterpret_cast<const unsigned char*>(out_.data());
    size_t i = 0;
    while (i < n) {  // the usual case: all well formed, nothing copied
      if (b[i] < 0x80) {
        ++i;
        continue;
      }
      const int len = Utf8Sequence(b + i, n - i);
      if (len <= 0) break;
      i += static_cast<size_t>(len);
    }
    if (i >= n) return n;
    std::string fixed(out_.data(), i);
    while (i < n) {
      const int len = b[i] < 0x80 ? 1 : Utf8Sequence(b + i, n - i);
      if (len > 0) {
        fixed.append(out_.data() + i, static_cast<size_t>(len));
        i += static_cast<size_t>(len);
      } else {
        fixed += "\xef\xbf\xbd";
        ++bad_utf8_;
        ++i;
      }
    }
    if (fixed.size() > out_.size()) out_.resize(fixed.size());
    std::memcpy(out_.data(), fixed.data(), fixed.size());
    return fixed.size();
  }

  size_t Inflate(size_t offset) {
    const size_t cap = out_.size() - offset;
    zs_.next_out = reinterpret_cast<Bytef*>(out_.data() + offset);
    zs_.avail_out = static_cast<uInt>(cap);
    while (zs_.avail_out == cap) {
      if (zs_.avail_in == 0) {
        size_t n = ReadRaw(in_.data(), in_.size());
        if (n == 0) {
          if (!member_done_ && io_error_.empty()) {
            damage_stat_ = "truncated_gzip";
            damage_ = absl::StrCat("the gzip stream ends early, after ", file_read_, " of its bytes");
          }
          break;
        }
        zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
        zs_.avail_in = static_cast<uInt>(n);
      }
      if (member_done_) {
        // Another member follows, or padding (gzip ignores trailing zeros).
        if (zs_.avail_in >= 2 && zs_.next_in[0] == 0x1f && zs_.next_in[1] == 0x8b) {
          inflateReset(&zs_);
          member_done_ = false;
        } else {
          trailing_garbage_ = true;
          zs_.avail_in = 0;
          // Nothing more will be inflated; drain the file so progress reaches 100%.
          char sink[4096];
          while (ReadRaw(sink, sizeof sink) > 0) {}
          break;
        }
      }
      int rc = inflate(&zs_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        member_done_ = true;
        continue;
      }
      if (rc == Z_OK) continue;
      if (rc == Z_BUF_ERROR && zs_.avail_in == 0) continue;  // needs more input
      damage_stat_ = "gzip_corrupt";
      const std::string msg = zs_.msg ? zs_.msg : absl::StrCat("error ", rc);
      if (absl::StrContains(msg, "incorrect data check") || absl::StrContains(msg, "incorrect length check"))
        damage_ = absl::StrCat("the gzip data is damaged: its checksum does not match what it inflates to (zlib: ",
                               msg, ", at the member's end, compressed byte ", file_read_ - zs_.avail_in, ")");
      else
        damage_ = absl::StrCat("the gzip data is damaged near compressed byte ", file_read_ - zs_.avail_in,
                               " (zlib: ", msg, ")");
      break;
    }
    return cap - zs_.avail_out;
  }

  std::string path_;
  int fd_ = -1;
  uint64_t file_bytes_ = 0, file_read_ = 0, out_total_ = 0;
  bool gzip_ = false, z_init_ = false, member_done_ = false, ended_ = false, trailing_garbage_ = false;
  z_stream zs_{};
  std::vector<char> in_, out_;
  std::string damage_, damage_stat_, io_error_;
  std::string carry_;             // bytes held back for the next piece (FixLoneSurrogates)
  std::string fixed_;             // a piece whose non-finite literals became null (FixNonFinite)
  bool in_string_ = false, escaped_ = false;  // FixNonFinite's place, from piece to piece
  int64_t non_finite_ = 0;
  int64_t lone_surrogates_ = 0;
  int64_t bad_utf8_ = 0;
};

// SAX handler: keeps a stack of what each open container is, fills one
// TraceEvent per element of traceEvents and skips everything else.
// Reading an arg's value as a number, a time or text, whatever JSON type it came as.
bool AsInt(const ArgValue& v, int64_t* out) {
  if (v.kind == ArgValue::kInt) {
    *out = v.i;
    return true;
  }
  if (v.kind == ArgValue::kFloat && std::isfinite(v.d) && v.d == std::floor(v.d) && std::fabs(v.d) < 9e18) {
    *out = static_cast<int64_t>(v.d);
    return true;
  }
  if (v.kind == ArgValue::kString && !v.text.empty()) {
    int64_t x = 0;
    size_t i = v.text[0] == '-' ? 1 : 0;
    if (i == v.text.size()) return false;
    for (; i < v.text.size(); ++i) {
      if (v.text[i] < '0' || v.text[i] > '9' || x > (std::numeric_limits<int64_t>::max() - 9) / 10) return false;
      x = x * 10 + (v.text[i] - '0');
    }
    *out = v.text[0] == '-' ? -x : x;
    return true;
  }
  return false;
}
bool AsDouble(const ArgValue& v, double* out) {
  if (v.kind == ArgValue::kInt) *out = static_cast<double>(v.i);
  else if (v.kind == ArgValue::kFloat) *out = v.d;
  else return false;
  return true;
}
// A time field (microseconds): a number, or a string holding one.
TraceEvent::Num Micros(const ArgValue& v, int64_t* ns) {
  if (v.kind == ArgValue::kInt) {
    if (v.i > 4000000000000000 || v.i < -4000000000000000) return TraceEvent::Num::kBad;
    *ns = v.i * 1000;
    return TraceEvent::Num::kOk;
  }
  if (v.kind == ArgValue::kFloat || v.kind == ArgValue::kString)
    return MicrosTextToNs(v.text, ns) ? TraceEvent::Num::kOk : TraceEvent::Num::kBad;
  return TraceEvent::Num::kBad;
}
std::string Text(const ArgValue& v) {
  switch (v.kind) {
    case ArgValue::kNull: return "null";
    case ArgValue::kBool: return v.b ? "true" : "false";
    case ArgValue::kInt: return std::to_string(v.i);
    case ArgValue::kFloat:
    case ArgValue::kString: return std::string(v.text);
  }
  return "";
}

class Handler {
 public:
  enum Role : uint8_t { kRoot, kTop, kEvents, kEvent, kArgs, kRanks, kShape, kDist, kOther, kDevProps, kDevProp, kSkip };

  Handler(const TraceInput& in, TraceFileInfo* info, const std::function<void(TraceEvent&)>& on_event,
          const std::function<void(uint64_t, uint64_t)>& on_progress)
      : in_(in), info_(info), on_event_(on_event), on_progress_(on_progress) {
    stack_.push_back({kRoot, ""});
  }

  // The parse stopped on purpose: why (a fatal shape problem), else "".
  const std::string& fatal() const { return fatal_; }
  bool root_done() const { return root_done_; }
  bool in_events() const { return events_open_; }
  bool saw_events() const { return saw_events_; }
  bool events_repeated() const { return events_repeated_; }
  // Depth of the innermost open container below traceEvents (0: between events).
  bool between_events() const { return events_open_ && stack_.back().role == kEvents; }
  int64_t events() const { return events_; }
  bool array_form() const { return array_form_; }
  // The top-level value began (an object or array was opened).
  bool started() const { return stack_.size() > 1 || root_done_; }

  // nlohmann's SAX interface.
  bool null() { return Scalar(Value{Value::kNull}); }
  bool boolean(bool b) {
    Value v{Value::kBool};
    v.b = b;
    return Scalar(v);
  }
  bool number_integer(int64_t i) {
    Value v{Value::kInt};
    v.i = i;
    return Scalar(v);
  }
  bool number_unsigned(uint64_t u) {
    Value v{Value::kInt};
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      v.kind = Value::kFloat;
      v.d = static_cast<double>(u);
      text_ = std::to_string(u);
      v.text = text_;
    } else {
      v.i = static_cast<int64_t>(u);
    }
    return Scalar(v);
  }
  bool number_float(double d, const std::string& s) {
    Value v{Value::kFloat};
    v.d = d;
    v.text = s;
    return Scalar(v);
  }
  bool string(std::string& s) {
    Value v{Value::kString};
    v.text = s;
    return Scalar(v);
  }
  bool binary(nlohmann::json::binary_t&) { return Scalar(Value{Value::kNull}); }
  bool key(std::string& k) {
    stack_.back().key = k;
    if (stack_.back().role == kEvent) ++event_.keys;
    return true;
  }
  bool start_object(size_t) { return Open(true); }
  bool start_array(size_t) { return Open(false); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool parse_error(size_t position, const std::string& last_token, const nlohmann::detail::exception& ex) {
    error_position_ = position;
    error_token_ = last_token;
    error_ = ex.what();
    // nlohmann's prefix ("[json.exception.parse_error.101] ") says nothing to a user.
    if (size_t p = error_.find("] "); p != std::string::npos && error_.rfind("[json.exception", 0) == 0)
      error_ = error_.substr(p + 2);
    return false;
  }
  const std::string& error() const { return error_; }
  const std::string& error_token() const { return error_token_; }
  size_t error_position() const { return error_position_; }

 private:
  using Value = ArgValue;
  struct Frame {
    Role role;
    std::string key;
  };
  static void SetId(const Value& v, JsonId* id, TraceEvent* e) {
    id->present = true;
    if (v.kind == Value::kString) {
      id->is_string = true;
      id->str = std::string(v.text);
    } else if (!AsInt(v, &id->num)) {
      e->flags |= TraceEvent::kBadPidTid;
    }
  }

  void Progress() {
    if (on_progress_ && in_.file_read() >= next_progress_) {
      on_progress_(in_.file_read(), in_.consumed());
      next_progress_ = in_.file_read() + (256 << 10);
    }
  }

  // A container starts where the top frame's current key (or element) is.
  bool Open(bool object) {
    Frame& top = stack_.back();
    const std::string& k = top.key;
    Role next = kSkip;
    switch (top.role) {
      case kRoot:
        if (root_done_) return true;
        if (object) {
          info_->object_form = true;
          next = kTop;
        } else {
          array_form_ = true;
          events_open_ = saw_events_ = true;
          next = kEvents;
        }
        break;
      case kTop:
        if (k == "traceEvents") {
          if (object) {
            fatal_ = "\"traceEvents\" is an object; it must be an array of events";
            return false;
          }
          events_repeated_ |= saw_events_;
          events_open_ = saw_events_ = true;
          next = kEvents;
        } else if (k == "distributedInfo" && object) {
          next = kDist;
        } else if (k == "otherData" && object) {
          next = kOther;
        } else if (k == "deviceProperties" && !object) {
          next = kDevProps;
        }
        break;
      case kEvents:
        event_.Clear();
        event_.index = events_;
        event_.offset = in_.consumed();
        if (object) {
          next = kEvent;
        } else {
          event_.flags |= TraceEvent::kNotObject;
          skip_event_ = true;
          next = kSkip;
        }
        break;
      case kEvent:
        if (k == "args") {
          if (object) next = kArgs;
          else event_.flags |= TraceEvent::kArgsNotObject;
        } else if (k == "pid" || k == "tid") {
          event_.flags |= TraceEvent::kBadPidTid;
        } else if (k == "ts") {
          event_.ts_state = TraceEvent::Num::kBad;
        } else if (k == "dur") {
          event_.dur_state = TraceEvent::Num::kBad;
        } else if (k == "ph") {
          event_.flags |= TraceEvent::kBadPhase;
        } else if (k == "name") {
          event_.flags |= TraceEvent::kNameNotString;
          event_.has_name = true;
          event_.name = object ? "{...}" : "[...]";
        } else if (k == "id2" && object) {
          next = kArgs;  // {"global": ..} / {"local": ..}: read as the id below
          id2_ = true;
        }
        break;
      case kArgs:
        if (!object && (k == "Process Group Ranks" || k == "pg ranks")) {
          next = kRanks;
        } else if (!object && !id2_) {
          shape_ = k == "grid" ? &event_.grid : k == "block" ? &event_.block : k == "Input Dims" ? &event_.input_dims
                   : k == "Input type" ? &event_.input_types : nullptr;
          if (shape_) {
            shape_->clear();
            if (k != "Input type") shape_->push_back('[');
            next = kShape;
          }
        }
        break;
      case kShape:
        if (object) {  // not a shape: dropped
          shape_->clear();
          shape_ = nullptr;
          next = kSkip;
        } else {
          ShapeText("[");
          next = kShape;
        }
        break;
      case kDevProps:
        if (object) {
          info_->devices.emplace_back();
          next = kDevProp;
        }
        break;
      default:
        break;
    }
    stack_.push_back({next, ""});
    if (next == kRanks) event_.pg_ranks = "[";
    return true;
  }

  bool Close() {
    Role role = stack_.back().role;
    stack_.pop_back();
    if (role == kArgs && id2_) id2_ = false;
    if (role == kRanks) event_.pg_ranks += "]";
    if (role == kShape && shape_) {
      const bool nested = stack_.back().role == kShape;
      if (nested || shape_ != &event_.input_types) shape_->push_back(']');
      if (!nested) shape_ = nullptr;
    }
    if (role == kEvent || (skip_event_ && stack_.back().role == kEvents)) {
      skip_event_ = false;
      on_event_(event_);
      ++events_;
      Progress();
    } else if (role == kEvents) {
      events_open_ = false;
    }
    if (stack_.size() == 1) root_done_ = true;
    return true;
  }

  bool Scalar(const Value& v) {
    Frame& top = stack_.back();
    const std::string& k = top.key;
    switch (top.role) {
      case kRoot:
        if (root_done_) return true;
        fatal_ = "the top level is a single value, not an object with \"traceEvents\" or an array of events";
        return false;
      case kTop:
        if (k == "traceEvents") {
          fatal_ = "\"traceEvents\" is not an array of events";
          return false;
        }
        if (k == "baseTimeNanoseconds" && AsInt(v, &info_->base_time_ns)) info_->has_base_time = true;
        if (k == "displayTimeUnit" && v.kind == Value::kString) info_->display_time_unit = std::string(v.text);
        return true;
      case kEvents:
        // A number or string where an event should be.
        event_.Clear();
        event_.index = events_;
        event_.offset = in_.consumed();
        event_.flags |= TraceEvent::kNotObject;
        on_event_(event_);
        ++events_;
        return true;
      case kEvent:
        EventField(k, v);
        return true;
      case kArgs:
        if (id2_) {
          if (k == "global" || k == "local") {
            event_.id = absl::StrCat(k, ":", Text(v));
            event_.has_id = true;
          }
        } else {
          ApplyTraceArg(event_, k, v);
        }
        return true;
      case kShape:
        if (!shape_) return true;
        if (v.kind == Value::kInt) ShapeText(std::to_string(v.i));
        else if (v.kind == Value::kString && shape_ == &event_.input_types) ShapeText(v.text.empty() ? "-" : v.text);
        else ShapeText(v.kind == Value::kNull ? "null" : "?");
        return true;
      case kRanks: {
        int64_t r;
        if (AsInt(v, &r)) absl::StrAppend(&event_.pg_ranks, event_.pg_ranks.size() > 1 ? ", " : "", r);
        return true;
      }
      case kDist:
        if (k == "rank" && AsInt(v, &info_->rank)) info_->has_rank = true;
        if (k == "world_size" && AsInt(v, &info_->world_size)) info_->has_world_size = true;
        if (k == "backend" && v.kind == Value::kString) info_->backend = std::string(v.text);
        return true;
      case kOther:
        if (k == "first_step_from_ns") AsInt(v, &info_->first_step_from_ns);
        if (v.kind != Value::kString) return true;
        if (k == "tool") info_->tool = std::string(v.text);
        if (k == "mesh") info_->mesh = std::string(v.text);
        if (k == "profile") info_->profile = std::string(v.text);
        if (k == "capture_note") info_->capture_note = std::string(v.text);
        if (k == "step_walls") info_->step_walls = std::string(v.text);
        return true;
      case kDevProp: {
        DeviceProperty& d = info_->devices.back();
        if (k == "id") AsInt(v, &d.id);
        if (k == "name" && v.kind == Value::kString) d.name = std::string(v.text);
        if (k == "totalGlobalMem") AsInt(v, &d.total_memory);
        return true;
      }
      default:
        return true;
    }
  }

  void EventField(const std::string& k, const Value& v) {
    TraceEvent& e = event_;
    if (k.empty()) return;
    switch (k[0]) {
      case 'p':
        if (k == "ph") {
          if (v.kind == Value::kString) e.ph = std::string(v.text);
          else e.flags |= TraceEvent::kBadPhase;
        } else if (k == "pid") {
          SetId(v, &e.pid, &e);
        }
        return;
      case 'n':
        if (k == "name") {
          e.has_name = true;
          if (v.kind == Value::kString) {
            e.name = std::string(v.text);
          } else {
            e.name = Text(v);
            e.flags |= TraceEvent::kNameNotString;
          }
        }
        return;
      case 'c':
        if (k == "cat") {
          if (v.kind == Value::kString) e.cat = std::string(v.text);
          else e.flags |= TraceEvent::kCatNotString;
        }
        return;
      case 't':
        if (k == "ts") e.ts_state = Micros(v, &e.ts_ns);
        else if (k == "tid") SetId(v, &e.tid, &e);
        return;
      case 'd':
        if (k == "dur") e.dur_state = Micros(v, &e.dur_ns);
        return;
      case 'i':
        if (k == "id" && v.kind != Value::kNull && v.kind != Value::kBool) {
          e.id = Text(v);
          e.has_id = true;
        }
        return;
      case 'b':
        if (k == "bp" && v.kind == Value::kString) e.bp = std::string(v.text);
        else if (k == "bind_id" && (v.kind == Value::kString || v.kind == Value::kInt)) e.bind_id = Text(v);
        return;
      case 's':
        if (k == "s" && v.kind == Value::kString) e.scope = std::string(v.text);
        return;
      case 'f':
        if (k == "flow_in" && v.kind == Value::kBool) e.flow_in = v.b;
        else if (k == "flow_out" && v.kind == Value::kBool) e.flow_out = v.b;
        return;
      default:
        return;
    }
  }

  // Appends one element of the shape array being read, after a comma unless
  // it opens the array; a shape longer than kMaxShape is cut with "...".
  void ShapeText(std::string_view text) {
    static constexpr size_t kMaxShape = 480;
    std::string& out = *shape_;
    if (out.size() > kMaxShape) return;
    if (!out.empty() && out.back() != '[') out.push_back(',');
    if (out.size() + text.size() > kMaxShape) {
      out += "...";
      return;
    }
    out.append(text);
  }

  const TraceInput& in_;
  TraceFileInfo* info_;
  const std::function<void(TraceEvent&)>& on_event_;
  const std::function<void(uint64_t, uint64_t)>& on_progress_;
  std::vector<Frame> stack_;
  TraceEvent event_;
  std::string* shape_ = nullptr;  // the TraceEvent field a kShape array fills
  std::string text_;
  std::string fatal_, error_;
  std::string error_token_;  // the token the parser stopped at
  size_t error_position_ = 0;
  int64_t events_ = 0;
  uint64_t next_progress_ = 0;
  bool root_done_ = false, events_open_ = false, saw_events_ = false, array_form_ = false;
  bool skip_event_ = false, id2_ = false;
  bool events_repeated_ = false;  // a second "traceEvents" key
};

// What a file that is not a trace at all starts with, to say so plainly.
std::string Sniff(const std::string& head) {
  auto starts = [&](std::string_view magic) { return head.compare(0, magic.size(), magic) == 0; };
  if (starts(std::string_view("SQLite format 3\0", 16)))
    return "is an SQLite database (a shardscope database?), not a trace; give the trace files first and the "
           "database with --db";
  if (starts("\x28\xb5\x2f\xfd")) return "is zstd-compressed; decompress it (zstd -d) or recompress it with gzip";
  if (starts("\xfd" "7zXZ")) return "is xz-compressed; decompress it (xz -d) or recompress it with gzip";
  if (starts("BZh")) return "is bzip2-compressed; decompress it (bunzip2) or recompress it with gzip";
  if (starts("PK\x03\x04")) return "is a zip archive; unzip it first";
  // A Perfetto protobuf trace: a Trace message, its first field a
  // TracePacket (tag 0x0a), binary bytes within the first few. JSON may start
  // with a newline too, but never holds a raw control byte.
  if (starts("\x0a") && std::any_of(head.begin() + 1, head.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u < 0x20 && u != '\t' && u != '\n' && u != '\r';
      }))
    return "looks like a Perfetto protobuf trace (.perfetto-trace, .pftrace), which import does not read; convert it "
           "to JSON with Perfetto's traceconv (`traceconv json TRACE OUT.json`) and import that";
  return "";
}

}  // namespace

void ApplyTraceArg(TraceEvent& e, const std::string& k, const ArgValue& v) {
  // Numeric args are kept for counters and instants only ("ph" usually comes
  // first; when it comes later they are kept in case).
  double d;
  const bool keep = e.ph.empty() || e.ph == "C" || e.ph == "i" || e.ph == "I";
  if (keep) {
    // A counter's value may come as a string holding a number, as "ts" may.
    const bool number =
        AsDouble(v, &d) || (v.kind == ArgValue::kString &&
                            absl::SimpleAtod(absl::string_view(v.text.data(), v.text.size()), &d) && std::isfinite(d));
    if (number && e.numbers.size() < 64) e.numbers.emplace_back(k, d);
    if (!number) ++e.non_numeric_args;
  }
  int64_t i;
  // Kineto's "correlation"; XLA's profiler (a GPU's launch and its kernels) "correlation_id".
  if (k == "correlation" || k == "correlation_id") { if (AsInt(v, &i)) e.correlation = i; }
  else if (k == "device") { if (AsInt(v, &i)) e.device = i; }
  else if (k == "stream") { if (AsInt(v, &i)) e.stream = i; }
  else if (k == "Seq" || k == "seq") { if (AsInt(v, &i)) e.seq = i; }
  else if (k == "In msg nelems" || k == "in_msg_nelems") { if (AsInt(v, &i)) e.in_nelems = i; }
  else if (k == "Out msg nelems" || k == "out_msg_nelems") { if (AsInt(v, &i)) e.out_nelems = i; }
  else if (k == "bytes") { if (AsInt(v, &i)) e.bytes = i; }
  else if (k == "sort_index") { if (AsInt(v, &i)) e.sort_index = i; }
  else if (k == "Process Group Name" || k == "pg_name") { if (v.kind != ArgValue::kNull) e.pg_name = Text(v); }
  else if (k == "Process Group Ranks" || k == "pg ranks") { if (v.kind == ArgValue::kString) e.pg_ranks = std::string(v.text); }
  else if (k == "Collective name" || k == "collective_name") { if (v.kind == ArgValue::kString) e.collective_name = std::string(v.text); }
  else if (k == "dtype") { if (v.kind == ArgValue::kString) e.dtype = std::string(v.text); }
  else if (k == "name") { e.arg_name = Text(v); }
  else if (k == "labels") { if (v.kind == ArgValue::kString) e.labels = std::string(v.text); }
  else if (k == "External id") { if (AsInt(v, &i)) e.external_id = i; }
  else if (k == "step_num") { if (AsInt(v, &i)) e.step_num = i; }
  else if (k == "device_ordinal") { if (AsInt(v, &i)) e.device_ordinal = i; }
  else if (k == "run_id") {
    uint64_t u;
    if (AsInt(v, &i)) {
      e.xla_run_id = i;
      e.has_xla_run_id = true;
    } else if ((v.kind == ArgValue::kString || v.kind == ArgValue::kFloat) &&
               absl::SimpleAtoi(absl::string_view(v.text.data(), v.text.size()), &u)) {
      e.xla_run_id = static_cast<int64_t>(u);  // past int64's top (an XSpace's uint64): its bits, still one id
      e.has_xla_run_id = true;
    } else {
      e.bad_run_id = true;
    }
  }
  else if (k == "hlo_op") { if (v.kind == ArgValue::kString) e.hlo_op = std::string(v.text); }
  else if (k == "hlo_module") { if (v.kind == ArgValue::kString) e.hlo_module = std::string(v.text); }
  else if (k == "kind") { if (v.kind == ArgValue::kString) e.slice_kind = std::string(v.text); }
  else if (k == "step") { if (AsInt(v, &i)) e.step = i; }
  else if (k == "depth") { if (AsInt(v, &i)) e.own_depth = i; }
  else if (k == "wait_us") { if (int64_t ns; Micros(v, &ns) == TraceEvent::Num::kOk && ns >= 0) e.wait_ns = ns; }
}

namespace {

bool IsGzip(std::string_view head) {
  return head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x1f && static_cast<unsigned char>(head[1]) == 0x8b;
}

// The first bytes a gzip file inflates to (fewer, or none, when it is damaged
// there): enough to tell what it holds.
std::string InflatedHead(int fd, bool* empty) {
  std::string in(64 << 10, '\0'), out(64, '\0');
  const ssize_t got = ::pread(fd, in.data(), in.size(), 0);
  if (got <= 0) return "";
  z_stream zs;
  std::memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return "";
  zs.next_in = reinterpret_cast<Bytef*>(in.data());
  zs.avail_in = static_cast<uInt>(got);
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&zs, Z_SYNC_FLUSH);
  out.resize(out.size() - zs.avail_out);
  *empty = rc == Z_STREAM_END && out.empty() && zs.avail_in == 0;  // one whole member of nothing, and no more
  inflateEnd(&zs);
  return out;
}

// An XSpace (XLA's profile) is read whole, inflated when gzipped: its planes
// keep their metadata after their events, so no event is named before its
// plane has been read to the end.
absl::StatusOr<ParseOutcome> ReadXSpaceFile(const std::string& path, int fd, uint64_t size, const std::string& head,
                                            TraceFileInfo* info, const std::function<void(TraceEvent&)>& on_event,
                                            const std::function<void(uint64_t, uint64_t)>& on_progress) {
  TraceInput in;
  in.set_binary();
  if (absl::Status st = in.Open(path, head, fd, size); !st.ok()) return st;
  ParseOutcome out;
  out.gzip = in.gzip();
  out.file_bytes = size;
  std::string bytes;
  bytes.reserve(out.gzip ? size * 4 : size);
  char buf[1 << 16];
  for (std::streamsize n; (n = in.sgetn(buf, sizeof buf)) > 0;) {
    bytes.append(buf, static_cast<size_t>(n));
    if (on_progress && (bytes.size() & ((16 << 20) - 1)) < sizeof buf) on_progress(in.file_read() / 2, 0);
  }
  if (!in.io_error().empty())
    return absl::DataLossError(absl::StrCat("reading ", path, " failed after ", in.file_read(), " bytes: ", in.io_error()));
  const bool damaged = in.damaged() && !absl::StrContains(in.damage(), "incorrect data check") &&
                       !absl::StrContains(in.damage(), "incorrect length check");
  absl::Status st = ReadXSpace(bytes, path, info, &out, on_event, [&](uint64_t at) {
    if (on_progress) on_progress(size / 2 + (bytes.empty() ? 0 : size * at / bytes.size() / 2), at);
  });
  if (!st.ok()) {
    if (damaged)  // what broke it
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", in.damage(), "; the XSpace inflated from it: ",
                                                     st.message()));
    return st;
  }
  if (damaged && out.truncated) {
    out.truncation_stat = in.damage_stat();
    out.truncation = absl::StrCat(in.damage(), "; ", out.truncation);
  } else if (damaged) {
    out.gzip_trailer_missing = true;  // the XSpace was whole: only the gzip's check was lost
  } else if (in.damaged()) {
    out.gzip_checksum_mismatch = true;
  }
  if (in.trailing_garbage()) out.gzip_trailing_garbage = true;
  return out;
}

}  // namespace

absl::StatusOr<ParseOutcome> ReadChromeTrace(const std::string& path, TraceFileInfo* info,
                                             const std::function<void(TraceEvent&)>& on_event,
                                             const std::function<void(uint64_t, uint64_t)>& on_progress) {
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::PermissionDeniedError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  if (!S_ISREG(sb.st_mode)) {
    const char* what = S_ISDIR(sb.st_mode) ? "a directory" : S_ISFIFO(sb.st_mode) ? "a FIFO (named pipe)"
                       : S_ISSOCK(sb.st_mode) ? "a socket" : "a device";
    return absl::InvalidArgumentError(absl::StrCat(path, " is ", what, ", not a trace file"));
  }
  if (sb.st_size == 0) return absl::InvalidArgumentError(absl::StrCat(path, " is empty (0 bytes), not a trace"));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::PermissionDeniedError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  std::string head(64, '\0');
  ssize_t got = ::pread(fd, head.data(), head.size(), 0);
  head.resize(got > 0 ? static_cast<size_t>(got) : 0);
  bool inflates_to_nothing = false;
  const std::string first = IsGzip(head) ? InflatedHead(fd, &inflates_to_nothing) : head;
  if (inflates_to_nothing) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, " is a gzip of nothing (it inflates to 0 bytes), not a trace"));
  }
  if (LooksLikeXSpace(first))
    return ReadXSpaceFile(path, fd, static_cast<uint64_t>(sb.st_size), head, info, on_event, on_progress);
  if (std::string why = Sniff(IsGzip(head) && Sniff(first).find("Perfetto") != std::string::npos ? first : head);
      !why.empty()) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, " ", why));
  }

  TraceInput in;
  if (absl::Status st = in.Open(path, head, fd, static_cast<uint64_t>(sb.st_size)); !st.ok()) return st;
  ParseOutcome out;
  out.gzip = in.gzip();
  out.file_bytes = static_cast<uint64_t>(sb.st_size);
  Handler h(in, info, on_event, on_progress);
  std::istream stream(&in);
  bool ok = nlohmann::json::sax_parse(stream, &h, nlohmann::json::input_format_t::json, /*strict=*/true);
  out.events = h.events();
  out.json_bytes = in.consumed();
  if (!in.io_error().empty())
    return absl::DataLossError(absl::StrCat("reading ", path, " failed after ", in.file_read(), " bytes: ", in.io_error()));
  auto where = [&](size_t pos) {
    return absl::StrCat("at byte ", pos, out.gzip ? " of the uncompressed JSON" : "",
                        h.in_events() ? absl::StrCat(" (in event #", h.events(), " of traceEvents)") : "");
  };
  if (!ok) {
    if (!h.fatal().empty()) return absl::InvalidArgumentError(absl::StrCat(path, " is not a Chrome trace: ", h.fatal()));
    // Ended early: the input stopped (a truncated or damaged gzip, or JSON cut
    // off) where the parser wanted more. Keep what was read.
    const bool eof = in.at_end() && h.error_position() >= in.consumed();
    if (h.root_done()) {
      // A complete value, then something else: another whole trace (two
      // files concatenated) loses its events; other bytes lose nothing.
      // (nlohmann's token text may hold the whitespace before it: its last character counts.)
      const std::string& t = h.error_token();
      if (!t.empty() && (t.back() == '{' || t.back() == '[')) out.second_document = true;
      else out.trailing_data = true;
    } else if (eof && h.saw_events()) {
      if (in.damaged()) {
        out.truncated = true;
        out.truncation_stat = in.damage_stat();
        out.truncation = in.damage();
      } else if (h.array_form() && h.between_events()) {
        out.array_unterminated = true;  // the format allows leaving out the final ']'
      } else {
        out.truncated = true;
        out.truncation_stat = "truncated_json";
        out.truncation = absl::StrCat("the JSON ends early, ", where(h.error_position()));
      }
    } else if (eof && in.damaged()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", in.damage(), ", before any trace event"));
    } else if (!h.started()) {
      return absl::InvalidArgumentError(absl::StrCat(path, " is not JSON", out.gzip ? " (after gunzip)" : "", ": ",
                                                     h.error(), "; expected a Chrome trace (JSON, optionally gzipped)"));
    } else {
      // Damaged compressed data can inflate to garbage before zlib notices:
      // read on to the gzip's checksum, and name the damage if it is there.
      if (out.gzip && !in.damaged()) in.Drain();
      if (in.damaged())
        return absl::InvalidArgumentError(absl::StrCat(path, ": ", in.damage(), "; the JSON read from it breaks ",
                                                       where(h.error_position()), ", where the damage shows"));
      return absl::InvalidArgumentError(absl::StrCat(path, ": invalid JSON ", where(h.error_position()), ": ", h.error()));
    }
  } else if (in.damaged()) {
    // The JSON was whole but the gzip stream was not: a checksum that does
    // not match says the bytes read may be wrong; a stream cut in its
    // trailer lost nothing but the check.
    if (absl::StrContains(in.damage(), "incorrect data check") || absl::StrContains(in.damage(), "incorrect length check"))
      out.gzip_checksum_mismatch = true;
    else
      out.gzip_trailer_missing = true;
  }
  if (in.trailing_garbage()) out.gzip_trailing_garbage = true;
  out.lone_surrogates = in.lone_surrogates();
  out.non_finite = in.non_finite();
  out.bad_utf8 = in.bad_utf8();
  out.events_repeated = h.events_repeated();
  if (!h.saw_events())
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a Chrome trace: it has no \"traceEvents\" array",
                                                   out.truncated ? " (the file ends early)" : ""));
  return out;
}

}  // namespace shardscope::store::internal
