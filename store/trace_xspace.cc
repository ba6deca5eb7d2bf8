#include "store/trace_xspace.h"

#include <bit>
#include <climits>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/io/coded_stream.h"

namespace shardscope::store::internal {
namespace {

using google::protobuf::io::CodedInputStream;

// The messages and field numbers read here, as xplane.proto defines them.
namespace xspace {
constexpr uint32_t kPlanes = 1, kErrors = 2, kWarnings = 3, kHostnames = 4;
}
namespace xplane {
constexpr uint32_t kId = 1, kName = 2, kLines = 3, kEventMetadata = 4, kStatMetadata = 5, kStats = 6;
}
namespace xline {
constexpr uint32_t kId = 1, kName = 2, kTimestampNs = 3, kEvents = 4, kDisplayName = 11;
}
namespace xevent {
constexpr uint32_t kMetadataId = 1, kOffsetPs = 2, kDurationPs = 3, kStats = 4, kNumOccurrences = 5;
}
namespace xstat {
constexpr uint32_t kMetadataId = 1, kDouble = 2, kUint64 = 3, kInt64 = 4, kStr = 5, kBytes = 6, kRef = 7;
}
namespace metadata {  // XEventMetadata, XStatMetadata
constexpr uint32_t kId = 1, kName = 2, kDisplayName = 4, kEventStats = 5;
}

enum Wire { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

struct Field {
  uint32_t number = 0;
  int wire = 0;
  uint64_t value = 0;      // a varint or fixed field
  std::string_view bytes;  // a length-delimited one
};

// The fields of one message in order, read with protobuf's own
// CodedInputStream. Stops at the end, or at bytes that are not a message
// (bad(); cut() when a field runs past the end, as in a file cut short).
class Fields {
 public:
  explicit Fields(std::string_view msg)
      : msg_(msg), in_(reinterpret_cast<const uint8_t*>(msg.data()), static_cast<int>(msg.size())) {
    in_.SetTotalBytesLimit(INT_MAX);
  }

  bool Next(Field* f) {
    if (bad_ || position() >= msg_.size()) return false;
    const uint32_t tag = in_.ReadTag();
    f->number = tag >> 3;
    f->wire = static_cast<int>(tag & 7);
    if (tag == 0 || f->number == 0) return Fail(Remaining() < 5);
    switch (f->wire) {
      case kVarint:
        return in_.ReadVarint64(&f->value) || Fail(Remaining() < 10);
      case kFixed64:
        return in_.ReadLittleEndian64(&f->value) || Fail(Remaining() < 8);
      case kFixed32: {
        uint32_t v = 0;
        if (!in_.ReadLittleEndian32(&v)) return Fail(Remaining() < 4);
        f->value = v;
        return true;
      }
      case kLen: {
        uint64_t len = 0;  // read whole: a 32-bit read keeps the low bits of a damaged length
        if (!in_.ReadVarint64(&len)) return Fail(Remaining() < 10);
        if (len > Remaining()) return Fail(true);
        f->bytes = msg_.substr(position(), len);
        return in_.Skip(static_cast<int>(len)) || Fail(true);
      }
      default:
        return Fail(false);
    }
  }
  bool bad() const { return bad_; }
  // Whether the bytes ran out inside the field that failed: a file cut
  // short, not garbage.
  bool cut() const { return cut_; }
  size_t position() const { return static_cast<size_t>(in_.CurrentPosition()); }

 private:
  size_t Remaining() const { return msg_.size() - std::min(msg_.size(), position()); }
  bool Fail(bool cut) {
    bad_ = true;
    cut_ = cut;
    return false;
  }

  std::string_view msg_;
  CodedInputStream in_;
  bool bad_ = false, cut_ = false;
};

struct EventMeta {
  std::string name;
  std::vector<std::string_view> stats;  // XStats every event of this kind carries
  bool memory = false;                  // XLA's allocator events, not spans
};

struct Plane {
  int64_t id = 0;
  std::string name;
  std::vector<std::string_view> lines, stats;
  absl::flat_hash_map<int64_t, EventMeta> events;
  absl::flat_hash_map<int64_t, std::string> stat_names;
};

bool Printable(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20) return false;
  return true;
}

// A plane's header and metadata; its lines are left as bytes.
bool ReadPlane(std::string_view bytes, Plane* p) {
  Fields fields(bytes);
  Field f;
  while (fields.Next(&f)) {
    if (f.number == xplane::kId && f.wire == kVarint) {
      p->id = static_cast<int64_t>(f.value);
    } else if (f.number == xplane::kName && f.wire == kLen) {
      p->name = std::string(f.bytes);
    } else if (f.number == xplane::kLines && f.wire == kLen) {
      p->lines.push_back(f.bytes);
    } else if (f.number == xplane::kStats && f.wire == kLen) {
      p->stats.push_back(f.bytes);
    } else if ((f.number == xplane::kEventMetadata || f.number == xplane::kStatMetadata) && f.wire == kLen) {
      // A map entry: key 1, value 2.
      Fields entry(f.bytes);
      Field e;
      int64_t key = 0;
      std::string_view value;
      while (entry.Next(&e)) {
        if (e.number == 1 && e.wire == kVarint) key = static_cast<int64_t>(e.value);
        else if (e.number == 2 && e.wire == kLen) value = e.bytes;
      }
      if (entry.bad()) return false;
      Fields md(value);
      Field m;
      std::string name, display;
      EventMeta meta;
      while (md.Next(&m)) {
        if (m.number == metadata::kName && m.wire == kLen) name = std::string(m.bytes);
        else if (f.number == xplane::kEventMetadata && m.number == metadata::kDisplayName && m.wire == kLen)
          display = std::string(m.bytes);
        else if (f.number == xplane::kEventMetadata && m.number == metadata::kEventStats && m.wire == kLen)
          meta.stats.push_back(m.bytes);
      }
      if (md.bad()) return false;
      if (f.number == xplane::kStatMetadata) {
        p->stat_names[key] = std::move(name);
      } else {
        meta.memory = name == "MemoryAllocation" || name == "MemoryDeallocation";
        // As XLA's trace viewer: the display name when there is one.
        meta.name = display.empty() ? std::move(name) : std::move(display);
        p->events[key] = std::move(meta);
      }
    }
  }
  return !fields.bad();
}

// An XStat as the arg a JSON trace would carry: its name, and its value.
struct Stat {
  const std::string* name = nullptr;
  ArgValue value{ArgValue::kNull};
  std::string text;  // a float's text, kept here
  bool bytes = false;
};

bool ReadStat(std::string_view bytes, const Plane& p, Stat* s) {
  Fields fields(bytes);
  Field f;
  int64_t id = -1;
  s->value = ArgValue{ArgValue::kNull};
  s->bytes = false;
  while (fields.Next(&f)) {
    switch (f.number) {
      case xstat::kMetadataId:
        id = static_cast<int64_t>(f.value);
        break;
      case xstat::kDouble: {
        const double d = std::bit_cast<double>(f.value);
        s->text = absl::StrCat(d);
        s->value = ArgValue{ArgValue::kFloat};
        s->value.d = d;
        s->value.text = s->text;
        break;
      }
      case xstat::kUint64:
        if (f.value <= static_cast<uint64_t>(INT64_MAX)) {
          s->value = ArgValue{ArgValue::kInt};
          s->value.i = static_cast<int64_t>(f.value);
        } else {
          s->text = absl::StrCat(f.value);
          s->value = ArgValue{ArgValue::kFloat};
          s->value.d = static_cast<double>(f.value);
          s->value.text = s->text;
        }
        break;
      case xstat::kInt64:
        s->value = ArgValue{ArgValue::kInt};
        s->value.i = static_cast<int64_t>(f.value);
        break;
      case xstat::kStr:
        s->value = ArgValue{ArgValue::kString};
        s->value.text = f.bytes;
        break;
      case xstat::kBytes:
        s->bytes = true;  // serialized protos (an HLO module): nothing an arg can hold
        break;
      case xstat::kRef: {
        // A string kept once, as a stat's name.
        auto it = p.stat_names.find(static_cast<int64_t>(f.value));
        s->value = ArgValue{ArgValue::kString};
        s->value.text = it == p.stat_names.end() ? std::string_view() : std::string_view(it->second);
        break;
      }
      default:
        break;
    }
  }
  if (fields.bad()) return false;
  auto it = p.stat_names.find(id);
  s->name = it == p.stat_names.end() ? nullptr : &it->second;
  return true;
}

// "/device:GPU:3" -> 3, else -1.
int DeviceOrdinal(const std::string& name) {
  absl::string_view s(name);
  if (!absl::ConsumePrefix(&s, "/device:")) return -1;
  const size_t colon = s.rfind(':');
  int n = -1;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(s.substr(colon + 1), &n) || n < 0) return -1;
  return n;
}

// Nanoseconds from picoseconds, rounded down: a span's end is taken from its
// own end in picoseconds, so a nested event never ends after its parent.
__int128 PsToNs128(__int128 ps) { return ps >= 0 ? ps / 1000 : -((-ps + 999) / 1000); }
int64_t PsToNs(int64_t ps) { return static_cast<int64_t>(PsToNs128(ps)); }
// Beyond about 100 years from the epoch a time is damage, as the JSON reader holds.
constexpr __int128 kMaxTimeNs = static_cast<__int128>(100) * 366 * 24 * 3600 * 1000000000LL;

class Emitter {
 public:
  Emitter(std::string_view all, const std::function<void(TraceEvent&)>& on_event,
          const std::function<void(uint64_t)>& on_progress, ParseOutcome* out)
      : all_(all), on_event_(on_event), on_progress_(on_progress), out_(out) {}

  void Metadata(int64_t pid, int64_t tid, const char* what, std::string_view name, int64_t sort_index = -1) {
    Start('M', pid, tid, nullptr);
    e_.name = what;
    if (sort_index >= 0) {
      e_.sort_index = sort_index;
    } else {
      ArgValue v{ArgValue::kString};
      v.text = name;
      ApplyTraceArg(e_, "name", v);
    }
    Emit();
  }

  // One line's events; false when its bytes are not an XLine.
  bool Line(const Plane& p, int64_t pid, std::string_view bytes, int64_t* max_timestamp) {
    Fields fields(bytes);
    Field f;
    int64_t id = 0, timestamp_ns = 0;
    std::string_view name, display;
    std::vector<std::string_view> events;
    while (fields.Next(&f)) {
      if (f.number == xline::kId && f.wire == kVarint) id = static_cast<int64_t>(f.value);
      else if (f.number == xline::kName && f.wire == kLen) name = f.bytes;
      else if (f.number == xline::kDisplayName && f.wire == kLen) display = f.bytes;
      else if (f.number == xline::kTimestampNs && f.wire == kVarint) timestamp_ns = static_cast<int64_t>(f.value);
      else if (f.number == xline::kEvents && f.wire == kLen) events.push_back(f.bytes);
    }
    if (fields.bad()) return false;
    // A thread id of the JSON's kind: host lines are numbered by hashes that
    // may not fit a signed id.
    const int64_t tid = id & INT64_MAX;
    Metadata(pid, tid, "thread_name", display.empty() ? name : display);
    Metadata(pid, tid, "thread_sort_index", {}, ++lines_);
    *max_timestamp = std::max(*max_timestamp, timestamp_ns);
    const int64_t line_ps = timestamp_ns;  // in ns; events add picoseconds to it
    for (std::string_view ev : events) {
      Fields ef(ev);
      Field g;
      int64_t metadata_id = 0, offset_ps = 0, duration_ps = 0;
      bool aggregated = false;
      stats_.clear();
      while (ef.Next(&g)) {
        if (g.number == xevent::kMetadataId) metadata_id = static_cast<int64_t>(g.value);
        else if (g.number == xevent::kOffsetPs) offset_ps = static_cast<int64_t>(g.value);
        else if (g.number == xevent::kDurationPs) duration_ps = static_cast<int64_t>(g.value);
        else if (g.number == xevent::kStats && g.wire == kLen) stats_.push_back(g.bytes);
        else if (g.number == xevent::kNumOccurrences) aggregated = true;
      }
      if (ef.bad()) return false;
      if (aggregated) {  // a count over the line, with no time of its own
        ++out_->xspace_aggregated_events;
        continue;
      }
      auto meta = p.events.find(metadata_id);
      static const EventMeta kUnknown{"<unknown>", {}, false};
      const EventMeta& m = meta == p.events.end() ? kUnknown : meta->second;
      if (meta == p.events.end() && out_->xspace_unnamed_events++ == 0)
        out_->xspace_first_unnamed = absl::StrCat("plane ", p.name, ", metadata id ", metadata_id);
      // In 128 bits: a damaged offset or duration near int64's ends must not wrap.
      const __int128 ts_wide = static_cast<__int128>(line_ps) + PsToNs(offset_ps);
      const __int128 end_wide =
          static_cast<__int128>(line_ps) + PsToNs128(static_cast<__int128>(offset_ps) + std::max<int64_t>(duration_ps, 0));
      const bool in_range = ts_wide > -kMaxTimeNs && ts_wide < kMaxTimeNs && end_wide < kMaxTimeNs;
      const int64_t ts = in_range ? static_cast<int64_t>(ts_wide) : 0;
      const int64_t end = in_range ? static_cast<int64_t>(end_wide) : 0;
      if (m.memory) {
        if (in_range) Memory(p, pid, tid, ts, m, ev);
        continue;
      }
      Start('X', pid, tid, ev.data());
      e_.name = m.name;
      e_.dur_state = TraceEvent::Num::kOk;
      e_.dur_ns = duration_ps < 0 ? PsToNs(duration_ps) : end - ts;
      e_.ts_ns = ts;
      if (!in_range) e_.ts_state = TraceEvent::Num::kBad;  // counted as the JSON's times past +-100 years are
      for (std::string_view s : m.stats) Arg(p, s);
      for (std::string_view s : stats_) Arg(p, s);  // the event's own, after its kind's: they win
      Emit();
    }
    return true;
  }

 private:
  void Start(char ph, int64_t pid, int64_t tid, const char* at) {
    e_.Clear();
    e_.index = out_->events;
    e_.offset = at ? static_cast<uint64_t>(at - all_.data()) : 0;
    e_.ph.assign(1, ph);
    e_.has_name = true;
    e_.keys = 6;
    e_.pid.present = e_.tid.present = true;
    e_.pid.num = pid;
    e_.tid.num = tid;
    e_.ts_state = TraceEvent::Num::kOk;
  }

  void Emit() {
    on_event_(e_);
    ++out_->events;
    if (on_progress_ && (out_->events & 0xffff) == 0) on_progress_(e_.offset);
  }

  void Arg(const Plane& p, std::string_view bytes) {
    if (!ReadStat(bytes, p, &stat_) || stat_.name == nullptr || stat_.bytes) return;
    ApplyTraceArg(e_, *stat_.name, stat_.value);
  }

  // XLA's allocator events: the bytes it holds after each, as a counter per allocator.
  void Memory(const Plane& p, int64_t pid, int64_t tid, int64_t ts, const EventMeta& m, std::string_view ev) {
    std::string_view allocator;
    double allocated = -1;
    auto take = [&](std::string_view s) {
      if (!ReadStat(s, p, &stat_) || stat_.name == nullptr) return;
      if (*stat_.name == "allocator_name" && stat_.value.kind == ArgValue::kString) allocator = stat_.value.text;
      if (*stat_.name == "bytes_allocated" && stat_.value.kind == ArgValue::kInt)
        allocated = static_cast<double>(stat_.value.i);
    };
    for (std::string_view s : m.stats) take(s);
    for (std::string_view s : stats_) take(s);
    if (allocated < 0) return;
    Start('C', pid, tid, ev.data());
    e_.ts_ns = ts;
    e_.name = absl::StrCat("XLA allocator ", allocator.empty() ? std::string("?") : std::string(allocator),
                           ": bytes allocated");
    e_.numbers.emplace_back("value", allocated);
    Emit();
  }

  std::string_view all_;
  const std::function<void(TraceEvent&)>& on_event_;
  const std::function<void(uint64_t)>& on_progress_;
  ParseOutcome* out_;
  TraceEvent e_;
  Stat stat_;
  std::vector<std::string_view> stats_;
  int64_t lines_ = 0;
};

}  // namespace

bool LooksLikeXSpace(std::string_view head) {
  // No plane, only the profiler's errors, warnings or host names (text): a
  // Perfetto trace holds packets (field 1) alone, and JSON starts otherwise.
  if (head.size() >= 3 && (head[0] == '\x12' || head[0] == '\x1a' || head[0] == '\x22') &&
      static_cast<unsigned char>(head[1]) < 0x80) {
    std::string_view text = head.substr(2, std::min<size_t>(static_cast<unsigned char>(head[1]), head.size() - 2));
    return text.empty() || Printable(text);
  }
  if (head.size() < 4 || head[0] != '\x0a') return false;
  // The first plane: its length, then its id (field 1, a varint) or its name
  // (field 2: text). A Perfetto TracePacket's field 1 is a message, its
  // field 2 a binary one.
  size_t i = 1;
  while (i < head.size() && (static_cast<unsigned char>(head[i]) & 0x80)) ++i;
  if (++i >= head.size()) return false;
  if (head[i] == '\x08') return true;
  if (head[i] != '\x12' || i + 2 >= head.size()) return false;
  const size_t len = static_cast<unsigned char>(head[i + 1]);
  if (len == 0 || len >= 0x80) return false;
  std::string_view name = head.substr(i + 2, std::min(len, head.size() - i - 2));
  return Printable(name) && (name[0] == '/' || absl::ascii_isalpha(static_cast<unsigned char>(name[0])));
}

absl::Status ReadXSpace(std::string_view bytes, const std::string& path, TraceFileInfo* info, ParseOutcome* out,
                        const std::function<void(TraceEvent&)>& on_event,
                        const std::function<void(uint64_t)>& on_progress) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is an XSpace of ", bytes.size() >> 20, " MiB, past the 2 GiB that one protobuf message can hold "
        "(XLA writes none that large): the file is damaged"));
  out->xspace = true;
  Fields space(bytes);
  Field f;
  Emitter emit(bytes, on_event, on_progress, out);
  int plane_index = 0, next_other_pid = 801;
  int64_t profile_start_ns = -1, max_line_timestamp = 0;
  bool any_lines = false;
  std::set<std::string> plane_names;  // of the planes with lines: XLA names each once
  while (space.Next(&f)) {
    if (f.number == xspace::kHostnames && f.wire == kLen) {
      if (info->hostname.empty()) info->hostname = std::string(f.bytes);
      continue;
    }
    if ((f.number == xspace::kErrors || f.number == xspace::kWarnings) && f.wire == kLen) {
      if (out->xspace_profiler_errors++ == 0) out->xspace_first_error = std::string(f.bytes.substr(0, 300));
      continue;
    }
    if (f.number != xspace::kPlanes || f.wire != kLen) {
      // An XSpace holds nothing else: these bytes are damage, and what follows them is not read.
      out->xspace_damaged++;
      if (out->xspace_damage.empty())
        out->xspace_damage = absl::StrCat("bytes that are no field of an XSpace after plane #", plane_index,
                                          " (field ", f.number, ", wire type ", f.wire, "): the rest of the file "
                                          "is not read");
      break;
    }
    Plane p;
    // A damaged plane or line is left out, said, and the rest read.
    auto damaged = [&](std::string_view part, const char* what) {
      if (out->xspace_damaged++ > 0) return;
      out->xspace_damage = absl::StrCat("plane #", plane_index, p.name.empty() ? "" : absl::StrCat(" (", p.name, ")"),
                                        ", ", what, " at byte ", static_cast<size_t>(part.data() - bytes.data()),
                                        out->gzip ? " of the inflated data" : "");
    };
    if (!ReadPlane(f.bytes, &p)) {
      damaged(f.bytes, "whose fields do not parse: left out");
      ++plane_index;
      continue;
    }
    if (p.name == "Task Environment") {
      for (std::string_view s : p.stats) {
        Stat st;
        if (ReadStat(s, p, &st) && st.name && *st.name == "profile_start_time" && st.value.kind == ArgValue::kInt)
          profile_start_ns = st.value.i;
      }
    }
    if (!p.lines.empty() && !plane_names.insert(p.name).second && out->xspace_duplicate_planes++ == 0)
      out->xspace_first_duplicate = p.name;
    if (!p.lines.empty()) {
      any_lines = true;
      const int ordinal = DeviceOrdinal(p.name);
      // As XLA's conversion numbers them: a device's plane its ordinal + 1, the host's 701.
      const int64_t pid = ordinal >= 0 && ordinal < 700 ? ordinal + 1 : p.name == "/host:CPU" ? 701 : next_other_pid++;
      emit.Metadata(pid, 0, "process_name", p.name);
      for (std::string_view line : p.lines)
        if (!emit.Line(p, pid, line, &max_line_timestamp))
          damaged(line, "a line whose events do not parse (those before the damage kept)");
    }
    ++plane_index;
  }
  if (space.bad()) {
    if (!space.cut())
      return absl::InvalidArgumentError(absl::StrCat(path, " is not a whole XSpace (XLA's profile, .xplane.pb): it stops "
                                                     "parsing at byte ", space.position(),
                                                     out->gzip ? " of the inflated data" : "", ", after ", plane_index,
                                                     " planes"));
    if (plane_index == 0)
      return absl::InvalidArgumentError(absl::StrCat(path, " is cut short: an XSpace (XLA's profile) of ", bytes.size(),
                                                     " bytes", out->gzip ? " inflated" : "",
                                                     " that ends inside its first plane, so nothing in it is whole"));
    out->truncated = true;
    out->truncation_stat = "truncated_xspace";
    out->truncation = absl::StrCat("the XSpace ends early, inside its plane #", plane_index, " (at byte ",
                                   space.position(), out->gzip ? " of the inflated data" : "",
                                   " of ", bytes.size(), "): that plane and any after it are lost");
  }
  if (!any_lines && !out->truncated)
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is an XSpace (XLA's profile) with no timelines: ", plane_index, " planes, none with a line of events",
        out->xspace_profiler_errors > 0 ? absl::StrCat("; the profiler wrote: \"", out->xspace_first_error, "\"")
                                        : std::string()));
  // XLA keeps times from the profile's start and the start itself on the
  // wall clock (Task Environment's profile_start_time); an XSpace whose lines
  // hold wall-clock times already needs no base.
  constexpr int64_t kYear2000Ns = 946684800LL * 1000000000LL;
  if (profile_start_ns > kYear2000Ns && max_line_timestamp < kYear2000Ns) {
    info->has_base_time = true;
    info->base_time_ns = profile_start_ns;
  }
  out->json_bytes = bytes.size();
  return absl::OkStatus();
}

}  // namespace shardscope::store::internal
