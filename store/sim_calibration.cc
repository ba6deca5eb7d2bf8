// sim_calibrations rows (see sim_calibration.h).
#include "store/sim_calibration.h"

#include <sqlite3.h>

#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "store/sqlite_util.h"

namespace shardscope::store {
namespace {

double Error(int64_t simulated, int64_t recorded) {
  return recorded > 0 ? std::fabs(static_cast<double>(simulated - recorded)) / static_cast<double>(recorded) : 0;
}

}  // namespace

double SimCalibrationRow::CalibratedError() const { return Error(calibrated_step_ns, recorded_step_ns); }
double SimCalibrationRow::UncalibratedError() const { return Error(uncalibrated_step_ns, recorded_step_ns); }

absl::Status WriteSimCalibration(const std::string& path, const SimCalibrationRow& row) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE, nullptr);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> db(raw, sqlite3_close);
  auto fail = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat("storing the calibration of run ", row.run_id, " in ", path, ": ",
                                               s.message()));
  };
  if (rc != SQLITE_OK) return fail(internal::SqliteStatus(rc, internal::DbError(raw)));
  sqlite3_busy_timeout(db.get(), 30000);
  internal::Stmt add;
  if (absl::Status s = add.Prepare(db.get(),
                                   "INSERT OR REPLACE INTO sim_calibrations(run_id, source_db, source_run,"
                                   " kernels_by_op, kernels_by_signature, kernels_modeled, collectives_recorded,"
                                   " collectives_modeled, recorded_step_ns, recorded_host_wait_ns,"
                                   " calibrated_step_ns, uncalibrated_step_ns)"
                                   " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
      !s.ok())
    return fail(s);
  add.Int(1, row.run_id);
  add.Text(2, row.source_db);
  add.Int(3, row.source_run);
  add.Int(4, row.kernels_by_op);
  add.Int(5, row.kernels_by_signature);
  add.Int(6, row.kernels_modeled);
  add.Int(7, row.collectives_recorded);
  add.Int(8, row.collectives_modeled);
  add.Int(9, row.recorded_step_ns);
  add.Int(10, row.recorded_host_wait_ns);
  add.Int(11, row.calibrated_step_ns);
  add.Int(12, row.uncalibrated_step_ns);
  if (absl::Status s = add.Run(); !s.ok()) return fail(s);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<SimCalibrationRow>> ReadSimCalibration(const Reader& reader, int64_t run_id) {
  auto has = reader.HasTable("sim_calibrations");
  if (!has.ok()) return has.status();
  if (!*has) return std::nullopt;
  auto q = reader.Query("SELECT * FROM sim_calibrations WHERE run_id = ?1", {absl::StrCat(run_id)});
  if (!q.ok()) return q.status();
  if (q->rows.empty()) return std::nullopt;
  SimCalibrationRow r;
  r.run_id = run_id;
  r.source_db = q->Text(0, "source_db");
  r.source_run = q->Int(0, "source_run");
  r.kernels_by_op = q->Int(0, "kernels_by_op");
  r.kernels_by_signature = q->Int(0, "kernels_by_signature");
  r.kernels_modeled = q->Int(0, "kernels_modeled");
  r.collectives_recorded = q->Int(0, "collectives_recorded");
  r.collectives_modeled = q->Int(0, "collectives_modeled");
  r.recorded_step_ns = q->Int(0, "recorded_step_ns");
  r.recorded_host_wait_ns = q->Int(0, "recorded_host_wait_ns");
  r.calibrated_step_ns = q->Int(0, "calibrated_step_ns");
  r.uncalibrated_step_ns = q->Int(0, "uncalibrated_step_ns");
  return r;
}

}  // namespace shardscope::store
