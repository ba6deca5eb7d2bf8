// Run states (see run_state.h).
#include "store/run_state.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace shardscope::store {
namespace {

int64_t UnixNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// State letter and start time (field 22) of /proc/PID/stat; false when unreadable.
bool ProcStat(int64_t pid, char* state, int64_t* start_ticks) {
  std::string stat = ReadSmallFile(absl::StrCat("/proc/", pid, "/stat"));
  size_t paren = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return false;
  std::istringstream rest(stat.substr(paren + 1));
  std::string field;
  std::vector<std::string> fields;  // fields 3, 4, ...
  while (rest >> field) fields.push_back(field);
  if (fields.size() < 20 || fields[0].empty()) return false;
  *state = fields[0][0];
  return absl::SimpleAtoi(fields[19], start_ticks);
}

std::string WriterText(const ProcessIdentity& who) {
  return absl::StrCat("its writer (pid ", who.pid, " on host ", who.host, ")");
}

std::string Ago(int64_t ns) {
  int64_t s = ns / 1'000'000'000;
  if (s < 120) return absl::StrCat(s, " s");
  if (s < 7200) return absl::StrCat(s / 60, " min");
  if (s < 2 * 86400) return absl::StrCat(s / 3600, " h");
  return absl::StrCat(s / 86400, " days");
}

}  // namespace

ProcessIdentity ThisProcess() {
  ProcessIdentity me;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) me.host = host;
  me.pid = getpid();
  me.boot_id = std::string(absl::StripAsciiWhitespace(ReadSmallFile("/proc/sys/kernel/random/boot_id")));
  char state = 0;
  if (!ProcStat(me.pid, &state, &me.start_ticks)) me.start_ticks = 0;
  return me;
}

std::optional<bool> ProcessAlive(const ProcessIdentity& who) {
  static const ProcessIdentity me = ThisProcess();
  if (who.host != me.host || who.pid <= 0) return std::nullopt;
  if (!who.boot_id.empty() && !me.boot_id.empty() && who.boot_id != me.boot_id) return false;  // rebooted since
  if (who.pid == me.pid && (who.start_ticks == 0 || who.start_ticks == me.start_ticks)) return true;
  if (kill(static_cast<pid_t>(who.pid), 0) != 0 && errno == ESRCH) return false;
  char state = 0;
  int64_t start = 0;
  if (ProcStat(who.pid, &state, &start)) {
    if (state == 'Z' || state == 'X') return false;                 // dead, not yet reaped
    if (who.start_ticks != 0 && start != who.start_ticks) return false;  // the pid is another process now
  }
  return true;
}

std::string RunState::Describe() const {
  // A run its hang detector ended stopped on purpose: said so, its note (the detector's sentence) after.
  std::string s = status == "hang detected" ? "ended by the hang detector" : status;
  // "interrupted by SIGINT (Ctrl-C) after step 8": the note names the signal
  // first, what else it says (records lost) after the step.
  std::string rest = detail;
  if (status == "interrupted" && !detail.empty()) {
    const size_t cut = detail.find("; ");
    absl::StrAppend(&s, " by ", detail.substr(0, cut));
    rest = cut == std::string::npos ? "" : detail.substr(cut + 2);
  }
  if (status == "running" || EndedEarly()) {
    absl::StrAppend(&s, last_step ? absl::StrCat(" after step ", *last_step) : std::string(" before any step"));
  }
  if (!rest.empty()) absl::StrAppend(&s, ": ", rest);
  return s;
}

absl::StatusOr<std::vector<RunState>> ReadRunStates(const Reader& reader) {
  auto has = reader.Query("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'run_writers'");
  if (!has.ok()) return has.status();
  const bool writers = has->Int(0, "n") > 0;  // a file from before run_writers has none
  auto q = reader.Query(absl::StrCat(
      "SELECT r.run_id, r.status, (SELECT max(step) FROM steps s WHERE s.run_id = r.run_id) AS last_step",
      writers ? ", w.run_id AS w_run, w.host, w.pid, w.boot_id, w.process_start, w.heartbeat_ns, w.closed_at_ns,"
                " w.records_lost, w.note FROM runs r LEFT JOIN run_writers w ON w.run_id = r.run_id"
              : " FROM runs r",
      " ORDER BY r.run_id"));
  if (!q.ok()) return q.status();
  std::vector<RunState> out;
  const int64_t now = UnixNowNs();
  for (size_t i = 0; i < q->rows.size(); ++i) {
    RunState st;
    st.run_id = q->Int(i, "run_id");
    st.stored_status = q->Text(i, "status");
    st.status = st.stored_status;
    if (!q->Text(i, "last_step").empty()) st.last_step = q->Int(i, "last_step");
    const bool has_writer = writers && !q->Text(i, "w_run").empty();
    if (has_writer) {
      st.records_lost = q->Int(i, "records_lost");
      st.detail = q->Text(i, "note");
    }
    if (st.stored_status == "running" && has_writer) {
      ProcessIdentity who{q->Text(i, "host"), q->Int(i, "pid"), q->Text(i, "boot_id"), q->Int(i, "process_start")};
      const int64_t beat = q->Int(i, "heartbeat_ns");
      std::string why;
      if (!q->Text(i, "closed_at_ns").empty()) {
        why = absl::StrCat(WriterText(who), " closed the file without ending the run");
      } else if (std::optional<bool> alive = ProcessAlive(who); alive.has_value() && (!*alive || who.start_ticks != 0)) {
        if (!*alive) why = absl::StrCat(WriterText(who), " is gone: killed or crashed");
      } else if (now - beat > kHeartbeatStaleNs) {
        // Alive by pid alone (the writer's start time unknown): the pid may be
        // another process's now, so the heartbeat decides, as the view does.
        why = absl::StrCat("no sign of life from ", WriterText(who), " for ", Ago(now - beat));
      }
      if (!why.empty()) {
        st.status = "ended abnormally";
        // The writer's own reason (a hang it detected) first: it says more than how it ended.
        st.detail = st.detail.empty() ? why : absl::StrCat(st.detail, "; ", why);
      }
    }
    out.push_back(std::move(st));
  }
  return out;
}

absl::StatusOr<RunState> ReadRunState(const Reader& reader, int64_t run_id) {
  auto all = ReadRunStates(reader);
  if (!all.ok()) return all.status();
  for (RunState& s : *all)
    if (s.run_id == run_id) return std::move(s);
  return absl::NotFoundError(absl::StrCat(reader.path(), " has no run ", run_id));
}

}  // namespace shardscope::store
