// How each run stands: still being written, finished, incomplete (records were
// lost) or ended abnormally (its writer was killed, crashed, or closed the file
// without ending the run). The writer records who it is in `run_writers` (host,
// pid, boot id, process start, a heartbeat); a reader on the same machine asks
// the kernel whether that process still lives, elsewhere it goes by the
// heartbeat. Reading needs no write access. The `run_status` view gives the
// heartbeat-only answer to plain SQL.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/reader.h"

namespace shardscope::store {

// A writer that has not said it is alive for this long is taken to be gone
// (it says so every WriterOptions::heartbeat_ms, 5 s by default).
inline constexpr int64_t kHeartbeatStaleNs = 60'000'000'000;

struct RunState {
  int64_t run_id = 0;
  // running | finished | incomplete | hang detected (the runtime's hang
  // detector ended it: a chip stopped) | interrupted (SIGINT, SIGTERM or
  // SIGHUP ended it, its records written) | ended abnormally (any other
  // stored value is passed on as it is).
  std::string status;
  std::string stored_status;          // runs.status as written
  std::optional<int64_t> last_step;   // the last step whose row reached the file
  int64_t records_lost = 0;
  std::string detail;                 // why, e.g. "its writer (pid 4242 on host h) is gone"
  // One line: "ended abnormally after step 7: its writer (pid 4242 on host h) is gone",
  // "ended by the hang detector after step 4: hang detected at step 5: chip 2 (host 0) stopped responding; ...".
  std::string Describe() const;
  // It ended before its last step: a hang detected, a signal, or its writer gone.
  bool EndedEarly() const {
    return status == "ended abnormally" || status == "hang detected" || status == "interrupted" || status == "failed";
  }
};

// The state of one run (NotFound when the file has no such run), or of all.
absl::StatusOr<RunState> ReadRunState(const Reader& reader, int64_t run_id);
absl::StatusOr<std::vector<RunState>> ReadRunStates(const Reader& reader);

// Who a process is, as the writer records it.
struct ProcessIdentity {
  std::string host;
  int64_t pid = 0;
  std::string boot_id;      // /proc/sys/kernel/random/boot_id, "" when unknown
  int64_t start_ticks = 0;  // start time after boot (/proc/PID/stat), 0 when unknown
};
ProcessIdentity ThisProcess();
// Whether that process still runs: true, false, or nullopt when it ran on
// another machine (this one cannot tell). A zombie, a reused pid (another
// start time) or another boot of this machine count as gone.
std::optional<bool> ProcessAlive(const ProcessIdentity& who);

}  // namespace shardscope::store
