// The background SQLite writer (see writer.h). Producers only append to a
// queue under a mutex; one thread owns the connection and writes whole batches
// inside one transaction each, which is what makes tens of thousands of slices
// per run cheap.
#include "store/writer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <exception>
#include <thread>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <random>
#include <tuple>
#include <unordered_map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "store/metrics.h"
#include "store/run_state.h"
#include "store/schema.h"
#include "store/slice_chunks.h"
#include "store/slice_vtab.h"
#include "store/sqlite_util.h"

#ifndef SHARDSCOPE_VERSION
#define SHARDSCOPE_VERSION "dev"
#endif

namespace shardscope::store {

using internal::Stmt;

namespace {

// Producers block once this many records wait, so a stalled disk bounds memory.
constexpr size_t kMaxQueued = 1 << 20;
// The thread writes once this many records wait, or after kLinger, or at once
// when someone is waiting in Flush/BeginRun/EndRun. Each commit rewrites every
// page it touched into the WAL (16 KiB each: the open summary and index pages
// again and again), so committing every few ms cost a traced run four times
// the system time of an untraced one; a tenth of a second keeps live views
// current and the WAL small.
constexpr size_t kBatch = 8192;
constexpr std::chrono::milliseconds kLinger{100};

int64_t UnixNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string IsoUtc(int64_t unix_ns) {
  std::time_t secs = static_cast<std::time_t>(unix_ns / 1000000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

// Everything the writer thread touches: the connection, one prepared INSERT
// per table, and the name-interning cache.
class Writer::Db {
 public:
  ~Db() {
    own_ = {};
    stmts_ = {};
    tl_ = {};  // statements must be finalized before the connection closes
    if (db_) sqlite3_close(db_);
  }

  absl::Status Open(const std::string& path, const WriterOptions& options) {
    // Never open what is not a regular file: opening a FIFO blocks.
    if (absl::Status st = internal::CheckRegularFile(path, /*may_be_missing=*/true); !st.ok()) return st;
    if (absl::Status st = CheckWritableDbPath(path); !st.ok()) return st;
    if (absl::Status st = internal::CheckFileHeader(path); !st.ok()) return st;
    // Another database's -wal beside this file: looked at through a read-only
    // connection, since closing a connection that may write checkpoints the
    // -wal into the file, the very harm this avoids.
    {
      sqlite3* ro = nullptr;
      absl::Status st;
      if (internal::GatherReadOpenFacts(path).wal_has_data &&
          sqlite3_open_v2(path.c_str(), &ro, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK)
        st = internal::CheckWalBelongs(path, ro);
      sqlite3_close(ro);
      if (!st.ok()) return st;
    }
    struct stat before;
    const bool new_file = ::stat(path.c_str(), &before) != 0 || before.st_size == 0;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot open ", path, " for writing: ", internal::DbError(db_)));
    }
    sqlite3_busy_timeout(db_, options.busy_timeout_ms);
    int version = 0;
    if (absl::Status st = internal::CheckShardscopeDb(db_, path, /*allow_empty=*/true, &version);
        !st.ok()) {
      return st;
    }
    // Appending to a damaged b-tree moves the damage into the new run, which
    // then cannot be read either: a file that has runs is checked first
    // (quick_check reads every page once, about 0.1 s per 20 MB; a file past
    // 512 MiB is left to `shardscope check`, to keep a run's start quick).
    struct stat sb;
    if (version > 0 && ::stat(path.c_str(), &sb) == 0 && sb.st_size <= (int64_t{512} << 20)) {
      auto quick = QueryText("PRAGMA quick_check(1)");
      if (!quick.ok() || *quick != "ok")
        return absl::DataLossError(absl::StrCat(
            path, " is damaged (", quick.ok() ? *quick : std::string(quick.status().message()),
            "): a new run is not written into it, since appending to a damaged file spreads the damage into the new "
            "run. Record into another file (--db); `shardscope check ", path, "` says what is damaged"));
    }
    // 16 KiB pages (a new file only): a chunk row of a step's slices is a few
    // KiB, and on 4 KiB pages most of them would get a page each, half empty.
    // WAL lets readers (the UI, the CLI) look at a run while it is being written.
    // Switching to WAL takes the file's exclusive lock, and SQLite answers
    // SQLITE_BUSY at once there instead of calling the busy handler: another
    // process writing a finished file (a rollback journal) is waited for here,
    // as the busy timeout promises, not failed at once.
    absl::Status st;
    // A new file's id (internal::CheckWalBelongs) goes into its header while
    // it is still in rollback mode: page 1 is then written to the main file
    // itself, before anything goes into a -wal.
    // Two runs starting into one new file race here: under the write lock,
    // only a file still without pages gets an id (the second writer's would
    // go into the first's -wal and tell a reader the -wal is a stranger's).
    if (new_file) {
      std::random_device rd;
      const int64_t id = 1 + static_cast<int64_t>(rd() % 0x7ffffffe);
      st = internal::Exec(db_, "PRAGMA page_size = 16384; BEGIN IMMEDIATE");
      if (st.ok()) {
        // (An empty file counts one page inside the transaction.)
        auto pages = QueryText("PRAGMA page_count");
        auto had = QueryText("PRAGMA user_version");
        if (pages.ok() && (*pages == "0" || *pages == "1") && had.ok() && *had == "0")
          st = internal::Exec(db_, absl::StrCat("PRAGMA user_version = ", id));
        st = st.ok() ? internal::Exec(db_, "COMMIT") : st;
        if (!st.ok()) internal::Exec(db_, "ROLLBACK").IgnoreError();
      }
      if (!st.ok()) return absl::Status(st.code(), absl::StrCat("cannot set up ", path, ": ", st.message()));
    }
    for (const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.busy_timeout_ms);;) {
      st = internal::Exec(db_, "PRAGMA page_size = 16384; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
                               " PRAGMA foreign_keys = ON;");
      if (st.ok() || (sqlite3_errcode(db_) & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= until) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // The schema and the meta rows in one transaction: a process killed (or a
    // disk that fills) while making them leaves an empty file, never half a schema.
    if (st.ok()) st = internal::Exec(db_, "BEGIN IMMEDIATE");
    if (st.ok()) {
      st = internal::Exec(
          // slice_chunks_by_track_span replaced an index without end_ns: one
          // pass over the table the first time a new writer opens an older file.
          db_, absl::StrCat("DROP INDEX IF EXISTS slice_chunks_by_track_time;", SchemaSql(),
                            "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', '",
                            kSchemaVersion, "'), ('tool', 'shardscope');"));
      st = st.ok() ? internal::Exec(db_, "COMMIT") : st;
      if (!st.ok()) internal::Exec(db_, "ROLLBACK").IgnoreError();
    }
    ring_steps_ = std::max(0, options.ring_steps);
    max_capture_bytes_ = std::max<int64_t>(0, options.max_capture_bytes);
    if (st.ok()) {
      auto page = QueryText("PRAGMA page_size");
      if (!page.ok() || !absl::SimpleAtoi(*page, &page_size_)) page_size_ = 4096;
    }
    if (st.ok()) st = PrepareTimeline();
    if (st.ok()) st = Migrate();
    if (st.ok()) st = internal::InstallNativeSlices(db_);  // the metrics at a run's end read slices
    if (st.ok() && options.max_file_bytes > 0) {
      auto page = QueryText("PRAGMA page_size");
      int64_t page_size = 0;
      if (page.ok() && absl::SimpleAtoi(*page, &page_size) && page_size > 0) {
        st = internal::Exec(db_, absl::StrCat("PRAGMA max_page_count = ",
                                              std::max<int64_t>(1, options.max_file_bytes / page_size)));
      }
    }
    if (!st.ok()) {
      return absl::Status(st.code(), absl::StrCat("cannot set up ", path, ": ", st.message()));
    }
    me_ = ThisProcess();
    std::random_device rd;
    token_ = absl::StrFormat("%08x%08x", rd(), rd());
    return Prepare();
  }

  // The outcome of one attempt at a batch. A failed attempt left nothing in
  // the file and the connection's state as before it (WriteBatch undoes it).
  struct BatchOutcome {
    absl::Status st;         // the transaction failed: nothing of the batch was written
    int64_t rows = 0;        // rows written
    int64_t item_errors = 0; // records refused one by one (the rest were written)
    absl::Status first_item_error;
  };

  BatchOutcome WriteBatch(const std::vector<Item>& batch) {
    BatchOutcome out;
    // A signal ended the run and the file was left whole for the process to
    // die: nothing more is written. A batch after it ran in rollback-journal
    // mode, and the signal's kill mid-transaction left the file longer in its
    // header than on disk until its hot journal was rolled back (a loaded
    // ctest read it "truncated").
    if (left_for_signal_) return out;
    snapshots_.clear();
    CheckCaptureCap();
    const int64_t run_before = run_id_, lost_before = lost_;
    const bool ended_before = run_ended_, gapped_before = gapped_;
    const std::string note_before = loss_note_;
    auto undo = [&](absl::Status st) {
      internal::Exec(db_, "ROLLBACK").IgnoreError();  // an error when SQLite already rolled back
      names_.clear();  // ids of names made in the transaction are gone with it
      run_id_ = run_before;
      lost_ = lost_before;
      run_ended_ = ended_before;
      gapped_ = gapped_before;
      loss_note_ = note_before;
      // The slices of open chunks go back to what the file has.
      for (auto& [track, snap] : snapshots_) {
        if (snap.has_value()) tracks_[track] = std::move(*snap);
        else tracks_.erase(track);
      }
      snapshots_.clear();
      batch_aggregates_.Clear();  // the batch's chunks go back into the open ones, and come again
      out.st = std::move(st);
      out.rows = 0;
      return out;
    };
    // IMMEDIATE: wait for another process's write lock here (busy timeout),
    // not halfway through the batch.
    if (absl::Status st = internal::Exec(db_, "BEGIN IMMEDIATE"); !st.ok()) {
      return undo(absl::Status(st.code(), absl::StrCat("starting a transaction: ", st.message())));
    }
    for (const Item& item : batch) {
      int64_t n = 0;
      absl::Status w = Write(item, &n);
      if (w.ok()) {
        out.rows += n;
        continue;
      }
      // A full disk, a lock, an I/O error: the transaction is lost (SQLite
      // may have rolled it back already). A bad record: only that record.
      if (internal::AbortsTransaction(w) || sqlite3_get_autocommit(db_)) return undo(w);
      ++out.item_errors;
      ++lost_;
      if (loss_note_.empty()) loss_note_ = std::string(w.message());
      if (out.first_item_error.ok()) out.first_item_error = w;
    }
    if (absl::Status c = internal::Exec(db_, "COMMIT"); !c.ok()) {
      return undo(absl::Status(c.code(), absl::StrCat("committing ", batch.size(), " records: ", c.message())));
    }
    if (interrupted_) {
      // A signal ends the process once this batch is written, before Close:
      // the file is left whole on its own now, as Close leaves it (a copy of
      // the .db without its -wal would lose the run's last steps).
      interrupted_ = false;
      left_for_signal_ = true;
      sqlite3_busy_timeout(db_, 0);
      if (internal::Exec(db_, "PRAGMA wal_checkpoint(TRUNCATE)").ok())
        internal::Exec(db_, "PRAGMA journal_mode = DELETE").IgnoreError();
    }
    snapshots_.clear();
    aggregates_.Merge(batch_aggregates_);
    batch_aggregates_.Clear();
    return out;
  }

  // A batch that could not be written: its records count as lost to the run.
  void GiveUp(const std::vector<Item>& batch, const absl::Status& why) {
    lost_ += Records(batch);
    if (run_id_ != 0 && !run_ended_) gapped_ = true;  // the run's later records are dropped (Write)
    if (loss_note_.empty()) loss_note_ = std::string(why.message());
    for (const Item& item : batch) {
      // The run never reached the file: what follows is dropped, not misfiled.
      if (std::holds_alternative<RunBegin>(item)) run_id_ = 0;
    }
  }

  // Says in run_writers that the writer is alive (its own small transaction).
  void Heartbeat() {
    if (run_id_ == 0 || run_ended_) return;
    own_.heartbeat.Int(1, run_id_);
    own_.heartbeat.Int(2, UnixNowNs());
    own_.heartbeat.Run().IgnoreError();  // a missed beat is no loss; a stale one reads as gone
  }

  // The writer closes: run_writers says so (a run not ended then reads as
  // ended abnormally), and the file is left self-contained where no other
  // connection has it open: WAL checkpointed and journal mode DELETE, so it
  // reads without -wal/-shm files (read-only media, a copy of the file alone).
  void Close() {
    if (!db_) return;
    if (run_id_ != 0) {
      Stmt& s = own_.writer_close;
      std::string note = LossNote();
      if (!abandon_reason_.empty())
        note = note.empty() ? abandon_reason_ : absl::StrCat(abandon_reason_, "; ", note);
      s.Int(1, run_id_);
      s.Int(2, UnixNowNs());
      s.Int(3, lost_);
      s.TextOrNull(4, note);
      s.Run().IgnoreError();
    }
    own_ = {};
    stmts_ = {};
    tl_ = {};
    sqlite3_busy_timeout(db_, 0);  // another connection open: leave WAL as it is, at once
    if (internal::Exec(db_, "PRAGMA wal_checkpoint(TRUNCATE)").ok()) {
      internal::Exec(db_, "PRAGMA journal_mode = DELETE").IgnoreError();
    }
  }

  int64_t lost() const { return lost_; }

  // The batch's records: a flush mark asks for a write and carries none.
  static int64_t Records(const std::vector<Item>& batch) {
    int64_t n = 0;
    for (const Item& i : batch) {
      if (const auto* b = std::get_if<SliceBatch>(&i)) n += static_cast<int64_t>(b->slices.size());
      else n += std::holds_alternative<FlushMark>(i) || std::holds_alternative<TrackEnd>(i) ? 0 : 1;
    }
    return n;
  }

  // Applies one queued item; returns the rows written.
  absl::Status Write(const Item& item, int64_t* rows) {
    if ((std::holds_alternative<FlushMark>(item) || std::holds_alternative<TrackEnd>(item)) && run_id_ == 0)
      return absl::OkStatus();
    if (!std::holds_alternative<RunBegin>(item) && run_id_ == 0) {
      return absl::FailedPreconditionError(
          "a record arrived before BeginRun and was dropped; call BeginRun first");
    }
    const auto* slices = std::get_if<SliceBatch>(&item);
    *rows = slices ? static_cast<int64_t>(slices->slices.size()) : 1;
    // After a batch of the run was lost (a full disk, an I/O error), its later
    // records are dropped too: written, they would leave a hole (steps 7-8
    // stored, 0-6 not) that every reader takes for the run's steps. What ends
    // the run and says why still goes in.
    if (gapped_ && !std::holds_alternative<RunBegin>(item) && !std::holds_alternative<RunEnd>(item) &&
        !std::holds_alternative<CaptureNote>(item) && !std::holds_alternative<AbandonReason>(item) &&
        !std::holds_alternative<ConfigField>(item) && !std::holds_alternative<FlushMark>(item)) {
      lost_ += *rows;
      *rows = 0;
      return absl::OkStatus();
    }
    return std::visit([this](const auto& r) { return WriteOne(r); }, item);
  }

  int64_t run_id() const { return run_id_; }

 private:
  struct Stmts {
    Stmt run, run_end, host, device, mesh, track, graph, compilation, compile_diff, execution, step,
        tensor, placement, counter, op, memory_plan, peak_buffer, memory_curve, fusion_edge, pass, decision, remat, auto_search, auto_candidate, auto_choice, name_find,
        name_add, hang, sharding_text, sharding_find, sharding_next;
  };

  // The first column of the first row of `sql` as text ("" when no row).
  absl::StatusOr<std::string> QueryText(const std::string& sql) {
    sqlite3_stmt* q = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &q, nullptr) != SQLITE_OK)
      return absl::InternalError(internal::DbError(db_));
    std::string out;
    if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_text(q, 0))
      out = reinterpret_cast<const char*>(sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    return out;
  }

  // Changes to v1 files made after files were written, applied in place when
  // a writer opens an older file (CREATE ... IF NOT EXISTS leaves an existing
  // table or view as it was):
  //  - steps.eval_loss, sharding_decisions.from_op_id, ops.moves_op_id,
  //    devices.topology_coords and devices.links: new columns, added.
  //  - slices.kind 'host_wait' (a device waiting for the host): a CHECK
  //    constraint, which SQLite cannot alter, so the table is rebuilt once.
  //  - step_device_summary.host_wait_ns: a view, dropped and made again.
  //  - devices.links with a "peers" list per kind of link: the links view,
  //    dropped and made again (it reads both forms).
  //  - kernel_stats.min_ns and max_ns: a view, dropped and made again.
  //  - shard_placements and sharding_decisions: tables made views (version 4).
  absl::Status Migrate() {
    auto eval = QueryText("SELECT COUNT(*) FROM pragma_table_info('steps') WHERE name = 'eval_loss'");
    if (!eval.ok()) return eval.status();
    if (*eval == "0") {
      if (absl::Status st = internal::Exec(db_, "ALTER TABLE steps ADD COLUMN eval_loss REAL;"); !st.ok()) return st;
    }
    for (const auto& [table, column, type] :
         {std::tuple{"sharding_decisions", "from_op_id", "INTEGER"}, std::tuple{"ops", "moves_op_id", "INTEGER"},
          std::tuple{"compilations", "cause_subkind", "TEXT"}, std::tuple{"compilations", "diff_total", "INTEGER"},
          std::tuple{"devices", "topology_coords", "TEXT"}, std::tuple{"devices", "links", "TEXT"}}) {
      auto has = QueryText(absl::StrCat("SELECT COUNT(*) FROM pragma_table_info('", table, "') WHERE name = '", column, "'"));
      if (!has.ok()) return has.status();
      if (*has != "0") continue;
      if (absl::Status st = internal::Exec(db_, absl::StrCat("ALTER TABLE ", table, " ADD COLUMN ", column, " ", type, ";"));
          !st.ok())
        return st;
    }
    for (const auto& [column, type] : {std::pair{"imported", "INTEGER NOT NULL DEFAULT 0"}, std::pair{"capture_note", "TEXT"}}) {
      auto has = QueryText(absl::StrCat("SELECT COUNT(*) FROM pragma_table_info('runs') WHERE name = '", column, "'"));
      if (!has.ok()) return has.status();
      if (*has != "0") continue;
      if (absl::Status st = internal::Exec(db_, absl::StrCat("ALTER TABLE runs ADD COLUMN ", column, " ", type, ";"));
          !st.ok())
        return st;
    }
    auto slices = QueryText("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'slices'");
    if (!slices.ok()) return slices.status();
    if (*slices != "0") {
      if (absl::Status st = ConvertV1Slices(); !st.ok()) return st;
    }
    auto rows = QueryText("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'slice_summaries'");
    if (!rows.ok()) return rows.status();
    if (*rows != "0") {
      if (absl::Status st = ConvertV2Summaries(); !st.ok()) return st;
    }
    auto v3 = QueryText(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ('shard_placements', 'sharding_decisions')");
    if (!v3.ok()) return v3.status();
    if (*v3 != "0") {
      if (absl::Status st = ConvertV3Placements(); !st.ok()) return st;
    }
    if (absl::Status st = ApplyViewTriggers(); !st.ok()) return st;
    for (const auto& [view, marker] : {std::pair{"step_device_summary", "host_wait_ns"},
                                       std::pair{"links", "$.peers"}, std::pair{"kernel_stats", "max_ns"}}) {
      auto sql = QueryText(
          absl::StrCat("SELECT sql FROM sqlite_master WHERE type = 'view' AND name = '", view, "'"));
      if (!sql.ok()) return sql.status();
      if (sql->find(marker) != std::string::npos) continue;
      if (absl::Status st = internal::Exec(db_, absl::StrCat("DROP VIEW IF EXISTS ", view, ";", SchemaSql()));
          !st.ok())
        return st;
    }
    return absl::OkStatus();
  }

  // The views' triggers (store/view_triggers.sql), made again in one
  // transaction when the file has an older set: `sharding_text_adds_insert`
  // came with the newest.
  absl::Status ApplyViewTriggers() {
    auto current =
        QueryText("SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND name = 'sharding_text_adds_insert'");
    if (!current.ok()) return current.status();
    if (*current != "0") return absl::OkStatus();
    if (absl::Status st = internal::Exec(db_, "BEGIN IMMEDIATE"); !st.ok()) return st;
    std::string sql;
    for (const char* view : {"shard_placements", "sharding_decisions", "shard_placement_cuts", "sharding_text_adds"}) {
      Stmt q;
      if (absl::Status st = q.Prepare(db_, "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?1");
          !st.ok()) {
        internal::Exec(db_, "ROLLBACK").IgnoreError();
        return st;
      }
      q.Text(1, view);
      while (sqlite3_step(q.get()) == SQLITE_ROW)
        absl::StrAppend(&sql, "DROP TRIGGER IF EXISTS \"", reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 0)),
                        "\";");
    }
    absl::Status st = internal::Exec(db_, absl::StrCat(sql, ViewTriggersSql()));
    if (st.ok()) st = internal::Exec(db_, "COMMIT");
    if (!st.ok()) internal::Exec(db_, "ROLLBACK").IgnoreError();
    return st;
  }

  // Version 3 kept a row per tensor per chip in a `shard_placements` table and
  // each decision's sharding text in `sharding_decisions`; version 4 keeps
  // spans of chips and each text once, behind views of those names. Rows that
  // belong to no run (damage: no reader could show them) are not carried.
  absl::Status ConvertV3Placements() {
    if (absl::Status st = internal::Exec(db_, "BEGIN IMMEDIATE"); !st.ok()) return st;
    auto fail = [&](absl::Status st) {
      internal::Exec(db_, "ROLLBACK").IgnoreError();
      return absl::Status(st.code(), absl::StrCat("migrating placements to schema version 4 (spans): ", st.message()));
    };
    auto is_table = [&](const char* name) -> absl::StatusOr<bool> {
      auto n = QueryText(absl::StrCat("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '", name, "'"));
      if (!n.ok()) return n.status();
      return *n != "0";
    };
    std::string sql;
    auto placements = is_table("shard_placements");
    if (!placements.ok()) return fail(placements.status());
    if (*placements) {
      // Consecutive chips with the same shard become one span: a chip's id
      // less its rank among the tensor's chips with that shard is constant
      // along a run of consecutive chips.
      absl::StrAppend(
          &sql,
          "INSERT OR REPLACE INTO shard_placement_spans"
          " SELECT run_id, tensor_id, tensor_name, min(device_id), max(device_id), index_ranges, bytes FROM"
          " (SELECT *, device_id - row_number() OVER (PARTITION BY run_id, tensor_id, tensor_name, index_ranges, bytes"
          "   ORDER BY device_id) AS island FROM shard_placements WHERE run_id IN (SELECT run_id FROM runs))"
          " GROUP BY run_id, tensor_id, tensor_name, index_ranges, bytes, island;"
          "DROP TABLE shard_placements;");
    }
    auto decisions = is_table("sharding_decisions");
    if (!decisions.ok()) return fail(decisions.status());
    if (*decisions) {
      absl::StrAppend(
          &sql,
          "INSERT OR IGNORE INTO sharding_texts"
          " SELECT run_id, row_number() OVER (PARTITION BY run_id ORDER BY sharding), sharding"
          " FROM (SELECT DISTINCT run_id, sharding FROM sharding_decisions WHERE run_id IN (SELECT run_id FROM runs));"
          "INSERT OR REPLACE INTO sharding_decision_rows"
          " SELECT d.run_id, d.graph_id, d.op_id, d.name, t.sharding_id, d.source, d.via, d.source_file,"
          " d.source_line, d.from_op_id FROM sharding_decisions d"
          " JOIN sharding_texts t ON t.run_id = d.run_id AND t.sharding = d.sharding;"
          "DROP TABLE sharding_decisions;");
    }
    if (sql.empty()) return internal::Exec(db_, "COMMIT");  // another writer did it while this one waited
    absl::Status st = internal::Exec(
        db_, absl::StrCat(sql, SchemaSql(), "UPDATE meta SET value = '", kSchemaVersion, "' WHERE key = 'schema_version';"));
    if (!st.ok()) return fail(st);
    if (st = internal::Exec(db_, "COMMIT"); !st.ok()) return fail(st);
    return absl::OkStatus();
  }

  // Version 2 kept a row per summary bucket in a `slice_summaries` table;
  // version 3 keeps them in groups (slice_summary_groups) behind a view of
  // that name. The rows are regrouped as they are, in one transaction.
  absl::Status ConvertV2Summaries() {
    if (absl::Status st = internal::Exec(db_, "BEGIN IMMEDIATE"); !st.ok()) return st;
    auto fail = [&](absl::Status st) {
      internal::Exec(db_, "ROLLBACK").IgnoreError();
      run_id_ = 0;
      return absl::Status(st.code(), absl::StrCat("migrating summaries to schema version 3 (groups): ", st.message()));
    };
    auto again = QueryText("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'slice_summaries'");
    if (!again.ok()) return fail(again.status());
    if (*again == "0") return internal::Exec(db_, "COMMIT");
    Stmt rows;
    if (absl::Status st = rows.Prepare(
            db_,
            "SELECT run_id, track_id, level, depth, bucket, count, busy_ns, compute_ns, collective_ns, transfer_ns,"
            " host_ns, compile_ns, host_wait_ns, longest_slice_id, longest_start_ns, longest_dur_ns, longest_name_id,"
            " longest_kind, first_step, last_step FROM slice_summaries"
            " ORDER BY run_id, track_id, level, depth, bucket");
        !st.ok())
      return fail(st);
    internal::SummaryGroup g;
    int64_t track = -1;
    auto put = [&]() -> absl::Status {
      if (g.buckets.empty()) return absl::OkStatus();
      absl::Status st = PutGroup(tl_.group_insert, track, g);
      g.buckets.clear();
      return st;
    };
    int rc;
    while ((rc = sqlite3_step(rows.get())) == SQLITE_ROW) {
      sqlite3_stmt* r = rows.get();
      auto col = [&](int i) { return sqlite3_column_int64(r, i); };
      const int level = static_cast<int>(col(2));
      if (level < 0 || level >= kNumSummaryLevels) continue;  // no reader could place it
      const int64_t run = col(0), tr = col(1), bucket = col(4);
      const auto depth = static_cast<int16_t>(std::clamp<int64_t>(col(3), 0, INT16_MAX));
      if (run != run_id_ || tr != track || level != g.level || depth != g.depth ||
          internal::GroupOf(bucket) != g.first_bucket) {
        if (absl::Status st = put(); !st.ok()) return fail(st);
        run_id_ = run;
        track = tr;
        g.level = level;
        g.depth = depth;
        g.first_bucket = internal::GroupOf(bucket);
      }
      SummaryBucket b;
      const int shift = internal::SummaryShift(level);
      b.start_ns = bucket << shift;
      b.width_ns = int64_t{1} << shift;
      b.depth = depth;
      b.count = std::max<int64_t>(1, col(5));
      for (int k = 0; k < kNumTimelineKinds; ++k) b.kind_ns[k] = std::max<int64_t>(0, col(7 + k));
      b.busy_ns = col(6);
      b.longest_slice_id = col(13);
      b.longest_start_ns = col(14);
      b.longest_dur_ns = std::max<int64_t>(0, col(15));
      b.longest_name_id = static_cast<int32_t>(std::clamp<int64_t>(col(16), 0, INT32_MAX));
      const int64_t kind = col(17);
      b.longest_kind = kind >= 0 && kind < kNumTimelineKinds ? static_cast<TimelineKind>(kind) : TimelineKind::kCompute;
      if (sqlite3_column_type(r, 18) != SQLITE_NULL && col(18) >= 0) {
        b.first_step = static_cast<int32_t>(std::min<int64_t>(col(18), INT32_MAX));
        b.last_step = static_cast<int32_t>(std::clamp<int64_t>(col(19), b.first_step, INT32_MAX));
      }
      internal::AddToGroup(g, b);
    }
    if (rc != SQLITE_DONE) return fail(absl::DataLossError(internal::DbError(db_)));
    if (absl::Status st = put(); !st.ok()) return fail(st);
    rows = Stmt();
    run_id_ = 0;
    absl::Status st = internal::Exec(
        db_, absl::StrCat("DROP TABLE slice_summaries;", SchemaSql(), "UPDATE meta SET value = '", kSchemaVersion,
                          "' WHERE key = 'schema_version';"));
    if (!st.ok()) return fail(st);
    if (st = internal::Exec(db_, "COMMIT"); !st.ok()) return fail(st);
    return absl::OkStatus();
  }

  // Version 1 kept one row per slice in a `slices` table. Version 2 keeps
  // them in chunks: every row goes through the same encoder and summaries as
  // a live run (so a migrated run reads exactly like a new one), then the
  // table makes way for the `slices` view, all in one transaction.
  absl::Status ConvertV1Slices() {
    if (absl::Status st = internal::Exec(db_, "BEGIN IMMEDIATE"); !st.ok()) return st;
    auto fail = [&](absl::Status st) {
      internal::Exec(db_, "ROLLBACK").IgnoreError();
      tracks_.clear();
      snapshots_.clear();
      run_id_ = 0;
      return absl::Status(st.code(), absl::StrCat("migrating slices to schema version 2 (chunks): ", st.message()));
    };
    // Another writer may have migrated the file while this one waited for the lock.
    auto again = QueryText("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'slices'");
    if (!again.ok()) return fail(again.status());
    if (*again == "0") return internal::Exec(db_, "COMMIT");
    Stmt rows;
    if (absl::Status st = rows.Prepare(
            db_,
            "SELECT s.run_id, s.track_id, s.slice_id, s.start_ns, s.dur_ns, s.depth, s.parent_id, s.name_id, s.kind,"
            " s.step, s.graph_id, s.op_id, s.flow_id, s.bytes, coalesce(t.clock, '') FROM slices s"
            " LEFT JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id"
            " ORDER BY s.run_id, s.track_id, s.start_ns, s.slice_id");
        !st.ok())
      return fail(st);
    auto opt = [&](int col) { return sqlite3_column_type(rows.get(), col) == SQLITE_NULL ? -1 : sqlite3_column_int64(rows.get(), col); };
    run_id_ = 0;
    int rc;
    while ((rc = sqlite3_step(rows.get())) == SQLITE_ROW) {
      const int64_t run = sqlite3_column_int64(rows.get(), 0);
      if (run != run_id_) {
        if (absl::Status st = FlushOpen(); !st.ok()) return fail(st);
        tracks_.clear();
        run_id_ = run;
      }
      trace::SliceRecord r;
      r.track_id = sqlite3_column_int64(rows.get(), 1);
      TimelineSlice t;
      t.slice_id = sqlite3_column_int64(rows.get(), 2);
      t.start_ns = sqlite3_column_int64(rows.get(), 3);
      t.dur_ns = std::max<int64_t>(0, sqlite3_column_int64(rows.get(), 4));
      t.depth = static_cast<int16_t>(std::clamp<int64_t>(sqlite3_column_int64(rows.get(), 5), 0, INT16_MAX));
      t.parent_id = opt(6);
      t.name_id = static_cast<int32_t>(sqlite3_column_int64(rows.get(), 7));
      const char* kind = reinterpret_cast<const char*>(sqlite3_column_text(rows.get(), 8));
      t.kind = KindCode(kind ? kind : "");
      const int64_t step = opt(9);
      t.step = step < 0 || step > INT32_MAX ? -1 : static_cast<int32_t>(step);
      t.graph_id = opt(10);
      t.op_id = opt(11);
      t.flow_id = opt(12);
      t.bytes = sqlite3_column_int64(rows.get(), 13);
      const char* clock = reinterpret_cast<const char*>(sqlite3_column_text(rows.get(), 14));
      track_clock_[r.track_id] = clock ? clock : "";
      if (absl::Status st = AddSlice(r.track_id, t); !st.ok()) return fail(st);
    }
    if (rc != SQLITE_DONE) return fail(absl::DataLossError(internal::DbError(db_)));
    rows = Stmt();
    if (absl::Status st = FlushOpen(); !st.ok()) return fail(st);
    tracks_.clear();
    snapshots_.clear();
    track_clock_.clear();
    run_id_ = 0;
    absl::Status st = internal::Exec(
        db_, absl::StrCat("DROP INDEX IF EXISTS slices_by_track_time; DROP INDEX IF EXISTS slices_by_flow;"
                          " DROP TABLE slices; DROP VIEW IF EXISTS events;",
                          SchemaSql(), "UPDATE meta SET value = '", kSchemaVersion, "' WHERE key = 'schema_version';"));
    if (!st.ok()) return fail(st);
    if (st = internal::Exec(db_, "COMMIT"); !st.ok()) return fail(st);
    return absl::OkStatus();
  }

  static TimelineKind KindCode(std::string_view kind) {
    for (int k = 0; k < kNumTimelineKinds; ++k)
      if (kind == TimelineKindName(static_cast<TimelineKind>(k))) return static_cast<TimelineKind>(k);
    return TimelineKind::kCompute;  // v1's CHECK allowed no other words
  }

  // The statements of the chunked timeline, ready before Migrate needs them.
  absl::Status PrepareTimeline() {
    const std::pair<Stmt*, const char*> all[] = {
        {&tl_.chunk,
         "INSERT INTO slice_chunks(run_id, track_id, step, graph_id, start_ns, end_ns, first_slice_id, count, slices)"
         " VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)"},
        // Level-of-detail groups (slice_chunks.h, TrackGroups).
        {&tl_.group_insert,
         "INSERT OR IGNORE INTO slice_summary_groups(run_id, track_id, level, depth, first_bucket, count,"
         " slice_base, step_base, buckets) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)"},
        {&tl_.group_replace,
         "INSERT OR REPLACE INTO slice_summary_groups(run_id, track_id, level, depth, first_bucket, count,"
         " slice_base, step_base, buckets) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)"},
        {&tl_.group_read,
         "SELECT slice_base, step_base, count, buckets FROM slice_summary_groups"
         " WHERE run_id = ?1 AND level = ?2 AND first_bucket = ?3 AND track_id = ?4 AND depth = ?5"},
        {&tl_.group_delete,
         "DELETE FROM slice_summary_groups"
         " WHERE run_id = ?1 AND level = ?2 AND first_bucket = ?3 AND track_id = ?4 AND depth = ?5"},
        {&tl_.bounds,
         "INSERT INTO step_bounds VALUES (?1,?2,?3,?4,?5) ON CONFLICT(run_id, clock, step) DO UPDATE SET"
         " start_ns = min(start_ns, excluded.start_ns), end_ns = max(end_ns, excluded.end_ns)"},
        {&tl_.track_clock, "SELECT clock FROM tracks WHERE run_id = ?1 AND track_id = ?2"},
        {&tl_.page_count, "PRAGMA page_count"},
        {&stmts_.name_find, "SELECT name_id FROM names WHERE name = ?1"},
        {&stmts_.name_add, "INSERT INTO names(name) VALUES (?1)"},
    };
    for (const auto& [stmt, sql] : all) {
      if (absl::Status st = stmt->Prepare(db_, sql); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

  absl::Status Prepare() {
    // OR REPLACE: a producer that describes the same thing twice (a device, a
    // step) means "this is the latest description", not an error to keep.
    const std::pair<Stmt*, const char*> all[] = {
        {&stmts_.run,
         "INSERT INTO runs(sample, mesh, mesh_axes, sharding, config_json, topology, profile,"
         " clock_kinds, tool_version, schema_version, simulated, num_hosts, num_devices,"
         " started_at, started_at_ns, status, imported)"
         " VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,'running',?16)"},
        {&stmts_.run_end, "UPDATE runs SET status = ?3, ended_at_ns = ?2 WHERE run_id = ?1"},
        {&stmts_.host, "INSERT OR REPLACE INTO hosts VALUES (?1,?2,?3)"},
        {&stmts_.device, "INSERT OR REPLACE INTO devices VALUES (?1,?2,?3,?4,?5,?6,?7,?8)"},
        {&stmts_.mesh, "INSERT OR REPLACE INTO meshes VALUES (?1,?2,?3,?4,?5)"},
        {&stmts_.track, "INSERT OR REPLACE INTO tracks VALUES (?1,?2,?3,?4,?5,?6,?7)"},
        {&own_.capture_note, "UPDATE runs SET capture_note = ?2 WHERE run_id = ?1"},
        {&own_.config_field,
         "UPDATE runs SET config_json = json_set(config_json, ?2, json(?3)) WHERE run_id = ?1"},
        {&stmts_.graph, "INSERT OR REPLACE INTO graphs VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)"},
        {&stmts_.compilation,
         "INSERT OR REPLACE INTO compilations(run_id, compile_id, step, graph_id, cache, cause_kind, cause_detail,"
         " source_file, source_line, duration_ns, prev_graph_id, call_site, host_start_ns, cause_subkind, diff_total)"
         " VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15)"},
        {&stmts_.compile_diff, "INSERT OR REPLACE INTO compile_diffs VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)"},
        {&stmts_.execution,
         "INSERT OR REPLACE INTO executions VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)"},
        {&stmts_.step,
         "INSERT OR REPLACE INTO steps(run_id, step, loss, wall_ns, eval_loss) VALUES (?1,?2,?3,?4,?5)"},
        {&stmts_.tensor,
         "INSERT OR REPLACE INTO tensors VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)"},
        {&stmts_.placement, "INSERT OR REPLACE INTO shard_placement_spans VALUES (?1,?2,?3,?4,?5,?6,?7)"},
        {&stmts_.hang, "INSERT OR REPLACE INTO hangs VALUES (?1,?2,?3,?4,?5,?6,?7,?8)"},
        {&stmts_.counter, "INSERT INTO counters VALUES (?1,?2,?3,?4,?5)"},
        {&stmts_.op,
         "INSERT OR REPLACE INTO ops(run_id, graph_id, op_id, name, opcode, shape, flops,"
         " bytes_read, bytes_written, modeled_ns, roofline, profile, source_file, source_line, scope, moves_op_id)"
         " VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16)"},
        {&stmts_.memory_plan, "INSERT OR REPLACE INTO memory_plans VALUES (?1,?2,?3,?4,?5,?6,?7)"},
        {&stmts_.peak_buffer, "INSERT OR REPLACE INTO peak_buffers VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)"},
        {&stmts_.memory_curve, "INSERT OR REPLACE INTO memory_curves VALUES (?1,?2,?3,?4,?5)"},
        {&stmts_.pass, "INSERT OR REPLACE INTO compile_passes VALUES (?1,?2,?3,?4,?5)"},
        {&stmts_.fusion_edge,
         "INSERT OR REPLACE INTO fusion_decisions VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)"},
        {&stmts_.decision, "INSERT OR REPLACE INTO sharding_decision_rows VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)"},
        {&stmts_.sharding_text, "INSERT INTO sharding_texts VALUES (?1,?2,?3)"},
        {&stmts_.sharding_find, "SELECT sharding_id FROM sharding_texts WHERE run_id = ?1 AND sharding = ?2"},
        {&stmts_.sharding_next, "SELECT coalesce(max(sharding_id), 0) + 1 FROM sharding_texts WHERE run_id = ?1"},
        {&stmts_.remat, "INSERT OR REPLACE INTO rematerializations VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)"},
        {&stmts_.auto_search, "INSERT OR REPLACE INTO auto_sharding VALUES (?1,?2,?3,?4,?5,?6,?7,?8)"},
        {&stmts_.auto_candidate,
         "INSERT OR REPLACE INTO auto_sharding_candidates VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)"},
        {&stmts_.auto_choice, "INSERT OR REPLACE INTO auto_sharding_choices VALUES (?1,?2,?3,?4,?5,?6)"},
    };
    for (const auto& [stmt, sql] : all) {
      if (absl::Status st = stmt->Prepare(db_, sql); !st.ok()) return st;
    }
    // Who writes each run, so readers can tell a live run from a killed one.
    const std::pair<Stmt*, const char*> writer[] = {
        {&own_.writer_begin,
         "INSERT OR REPLACE INTO run_writers(run_id, host, pid, boot_id, process_start, token, heartbeat_ns)"
         " VALUES (?1,?2,?3,?4,?5,?6,?7)"},
        {&own_.heartbeat, "UPDATE run_writers SET heartbeat_ns = ?2 WHERE run_id = ?1"},
        {&own_.writer_end,
         "UPDATE run_writers SET heartbeat_ns = ?2, records_lost = ?3, note = ?4 WHERE run_id = ?1"},
        {&own_.writer_close,
         "UPDATE run_writers SET closed_at_ns = ?2, heartbeat_ns = ?2, records_lost = ?3, note = ?4"
         " WHERE run_id = ?1"},
    };
    for (const auto& [stmt, sql] : writer) {
      if (absl::Status st = stmt->Prepare(db_, sql); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

  // "N records were not written (the first: why)", or "" when none were lost.
  std::string LossNote() const {
    if (lost_ == 0) return "";
    return absl::StrCat(lost_, lost_ == 1 ? " record was" : " records were", " not written (the first: ",
                        loss_note_, ")");
  }

  // Interned name id; names are shared by all runs in the file.
  absl::StatusOr<int64_t> NameId(const std::string& name) {
    if (auto it = names_.find(name); it != names_.end()) return it->second;
    int64_t id = 0;
    stmts_.name_find.Text(1, name);
    if (sqlite3_step(stmts_.name_find.get()) == SQLITE_ROW) {
      id = sqlite3_column_int64(stmts_.name_find.get(), 0);
    }
    sqlite3_reset(stmts_.name_find.get());
    if (id == 0) {
      stmts_.name_add.Text(1, name);
      if (absl::Status st = stmts_.name_add.Run(); !st.ok()) return st;
      id = sqlite3_last_insert_rowid(db_);
    }
    names_.emplace(name, id);
    return id;
  }

  static absl::Status Tag(absl::Status st, const char* table, int64_t id) {
    if (st.ok()) return st;
    // The code stays: it tells a bad row from a full disk or a lock.
    return absl::Status(st.code(), absl::StrCat("writing ", table, " row (id ", id, "): ", st.message()));
  }

  absl::Status WriteOne(const RunBegin& b) {
    const trace::RunRecord& r = b.run;
    if (run_id_ != 0) {
      if (absl::Status st = FlushOpen(); !st.ok()) return st;
    }
    tracks_.clear();
    track_clock_.clear();
    aggregates_.Clear();
    batch_aggregates_.Clear();
    aggregates_exact_ = true;
    notes_.clear();
    ring_note_.clear();
    capture_stopped_ = false;
    not_captured_ = 0;
    last_step_ = -1;
    trimmed_through_ = -1;
    run_id_ = 0;  // if the insert fails, later records are dropped, not misfiled
    int64_t started = r.started_at_unix_ns ? r.started_at_unix_ns : UnixNowNs();
    Stmt& s = stmts_.run;
    s.Text(1, r.sample); s.Text(2, r.mesh); s.Text(3, r.mesh_axes); s.Text(4, r.sharding);
    s.Text(5, r.config_json.empty() ? "{}" : r.config_json); s.Text(6, r.topology);
    s.Text(7, r.profile); s.Text(8, r.clock_kinds);
    s.Text(9, r.tool_version.empty() ? SHARDSCOPE_VERSION : r.tool_version);
    s.Int(10, kSchemaVersion); s.Int(11, r.simulated ? 1 : 0); s.Int(12, r.num_hosts);
    simulated_ = r.simulated;
    s.Int(13, r.num_devices); s.Text(14, IsoUtc(started)); s.Int(15, started); s.Int(16, r.imported ? 1 : 0);
    if (absl::Status st = s.Run(); !st.ok()) return Tag(st, "runs", 0);
    int64_t id = sqlite3_last_insert_rowid(db_);
    Stmt& w = own_.writer_begin;
    w.Int(1, id); w.Text(2, me_.host); w.Int(3, me_.pid); w.Text(4, me_.boot_id); w.Int(5, me_.start_ticks);
    w.Text(6, token_); w.Int(7, UnixNowNs());
    if (absl::Status st = w.Run(); !st.ok()) return Tag(st, "run_writers", id);
    run_id_ = id;
    lost_ = 0;
    gapped_ = false;
    loss_note_.clear();
    abandon_reason_.clear();
    run_ended_ = false;
    return absl::OkStatus();
  }
  // The run ends: its row says so ('incomplete' when records of it were
  // lost), and its metrics report is stored.
  absl::Status WriteOne(const RunEnd& e) {
    if (e.status == "interrupted" && (run_id_ == 0 || run_ended_)) return absl::OkStatus();  // ended before
    if (absl::Status st = FlushOpen(); !st.ok()) return Tag(st, "slice_chunks", run_id_);
    if (capture_stopped_)
      if (absl::Status st = WriteCaptureNote(); !st.ok()) return Tag(st, "runs", run_id_);
    stmts_.run_end.Int(1, run_id_);
    stmts_.run_end.Int(2, e.ended_at_ns);
    stmts_.run_end.Text(3, !e.status.empty() ? e.status : lost_ > 0 ? "incomplete" : "finished");
    if (absl::Status st = stmts_.run_end.Run(); !st.ok()) return Tag(st, "runs", run_id_);
    Stmt& w = own_.writer_end;
    if (!e.note.empty()) abandon_reason_ = e.note;  // Close writes the note again: kept
    std::string note = LossNote();
    if (!e.note.empty()) note = note.empty() ? e.note : absl::StrCat(e.note, "; ", note);
    w.Int(1, run_id_); w.Int(2, UnixNowNs()); w.Int(3, lost_); w.TextOrNull(4, note);
    if (absl::Status st = w.Run(); !st.ok()) return Tag(st, "run_writers", run_id_);
    run_ended_ = true;
    interrupted_ = e.status == "interrupted";
    // The writer's aggregates stand for the slices only when every slice of
    // the run is in the file; else the metrics read the slices back.
    const bool complete = aggregates_exact_ && ring_steps_ <= 0 && !capture_stopped_ && lost_ == 0;
    RunAggregates all = aggregates_;
    all.Merge(batch_aggregates_);  // this batch's, not committed yet
    return Tag(internal::StoreRunMetrics(db_, run_id_, complete ? &all : nullptr), "metrics", run_id_);
  }
  absl::Status WriteOne(const trace::HostRecord& r) {
    Stmt& s = stmts_.host;
    s.Int(1, run_id_); s.Int(2, r.host_id); s.Text(3, r.name);
    return Tag(s.Run(), "hosts", r.host_id);
  }
  absl::Status WriteOne(const trace::DeviceRecord& r) {
    Stmt& s = stmts_.device;
    s.Int(1, run_id_); s.Int(2, r.device_id); s.Int(3, r.host_id); s.Text(4, r.coords);
    s.Int(5, r.hbm_bytes); s.Real(6, r.peak_flops);
    s.TextOrNull(7, r.topology_coords); s.TextOrNull(8, r.links_json);
    return Tag(s.Run(), "devices", r.device_id);
  }
  absl::Status WriteOne(const trace::MeshRecord& r) {
    Stmt& s = stmts_.mesh;
    s.Int(1, run_id_); s.Int(2, r.mesh_id); s.Text(3, r.shape); s.Text(4, r.axis_names);
    s.Text(5, r.device_ids);
    return Tag(s.Run(), "meshes", r.mesh_id);
  }
  absl::Status WriteOne(const trace::TrackRecord& r) {
    Stmt& s = stmts_.track;
    track_clock_[r.track_id] = trace::ClockName(r.clock);
    s.Int(1, run_id_); s.Int(2, r.track_id); s.Text(3, r.name); s.Text(4, trace::ClockName(r.clock));
    s.IntOrNull(5, r.device_id); s.Int(6, r.host_id); s.TextOrNull(7, r.thread_name);
    return Tag(s.Run(), "tracks", r.track_id);
  }
  absl::Status WriteOne(const trace::SliceRecord& r) {
    if (capture_stopped_) {
      ++not_captured_;
      return absl::OkStatus();
    }
    absl::StatusOr<int64_t> name = NameId(r.name);
    if (!name.ok()) return Tag(name.status(), "names", r.slice_id);
    TimelineSlice t;
    t.slice_id = r.slice_id;
    t.start_ns = r.start_ns;
    t.dur_ns = std::max<int64_t>(0, r.dur_ns);
    t.depth = static_cast<int16_t>(std::clamp(r.depth, 0, int{INT16_MAX}));
    t.parent_id = r.parent_id;
    t.name_id = static_cast<int32_t>(*name);
    t.kind = static_cast<TimelineKind>(r.kind);
    t.step = r.step;
    t.graph_id = r.graph_id;
    t.op_id = r.op_id;
    t.flow_id = r.flow_id;
    t.bytes = r.bytes;
    t.arrival_ns = r.arrival_ns;
    if (!r.category.empty()) {
      absl::StatusOr<int64_t> cat = NameId(r.category);
      if (!cat.ok()) return Tag(cat.status(), "names", r.slice_id);
      t.category_id = static_cast<int32_t>(*cat);
    }
    if (!r.shape.empty()) {
      absl::StatusOr<int64_t> shape = NameId(r.shape);
      if (!shape.ok()) return Tag(shape.status(), "names", r.slice_id);
      t.shape_id = static_cast<int32_t>(*shape);
    }
    return Tag(AddSlice(r.track_id, t), "slice_chunks", r.slice_id);
  }

  // The track's open chunk and summaries, saved as they were before this
  // batch the first time the batch touches them (a rolled-back batch puts
  // them back, so a retry neither loses nor doubles a slice).
  struct TrackState {
    internal::ChunkEncoder chunk;
    internal::TrackSummaries summaries;
    internal::TrackGroups groups;
    // For the run's aggregates (RunAggregates), of the open chunk: its compute
    // and collective kernels' first start and last end, and its slices' ops.
    int64_t kernels_start = INT64_MAX, kernels_end = INT64_MIN;
    std::vector<int32_t> ops;
  };
  TrackState& Touch(int64_t track) {
    auto it = tracks_.find(track);
    if (!snapshots_.count(track))
      snapshots_.emplace(track, it == tracks_.end() ? std::nullopt : std::optional<TrackState>(it->second));
    return it == tracks_.end() ? tracks_[track] : it->second;
  }

  absl::Status AddSlice(int64_t track, const TimelineSlice& t) {
    TrackState& ts = Touch(track);
    current_track_ = track;
    // A chunk holds one step of one program: a fold or a ring trim never splits one.
    if (!ts.chunk.empty() && (ts.chunk.step() != t.step || ts.chunk.graph_id() != t.graph_id ||
                              ts.chunk.count() >= internal::kChunkSlices ||
                              ts.chunk.bytes() >= internal::kChunkTextBytes)) {
      if (absl::Status st = EmitChunk(track, ts); !st.ok()) return st;
    }
    if (ts.chunk.empty()) ts.chunk.Reset(t.step, t.graph_id);
    ts.chunk.Add(t);
    if (t.kind == TimelineKind::kCompute || t.kind == TimelineKind::kCollective) {
      ts.kernels_start = std::min(ts.kernels_start, t.start_ns);
      ts.kernels_end = std::max(ts.kernels_end, t.start_ns + t.dur_ns);
    }
    if (t.op_id >= 0) {
      if (t.op_id <= INT32_MAX) ts.ops.push_back(static_cast<int32_t>(t.op_id));
      else aggregates_exact_ = false;
    }
    ts.summaries.Add(t, &closed_);
    return closed_.empty() ? absl::OkStatus() : WriteClosed(ts);
  }

  absl::Status EmitChunk(int64_t track, TrackState& ts) {
    Stmt& c = tl_.chunk;
    c.Int(1, run_id_); c.Int(2, track); c.IntOrNull(3, ts.chunk.step()); c.IntOrNull(4, ts.chunk.graph_id());
    c.Int(5, ts.chunk.start_ns()); c.Int(6, ts.chunk.end_ns()); c.Int(7, ts.chunk.first_slice_id());
    c.Int(8, ts.chunk.count()); c.Text(9, ts.chunk.Text());
    if (absl::Status st = c.Run(); !st.ok()) return st;
    if (ts.chunk.step() >= 0) {
      const std::string& clock = ClockOf(track);
      if (!clock.empty()) {
        Stmt& b = tl_.bounds;
        b.Int(1, run_id_); b.Int(2, ts.chunk.step()); b.Text(3, clock); b.Int(4, ts.chunk.start_ns());
        b.Int(5, ts.chunk.end_ns());
        if (absl::Status st = b.Run(); !st.ok()) return st;
      }
    }
    // The run's aggregates, from this chunk (one step and program of one track).
    const std::string& clock = ClockOf(track);
    if (clock.empty()) {
      aggregates_exact_ = false;  // a slice before its track: the run's end reads the slices instead
    } else if (clock == "device") {
      if (ts.kernels_start <= ts.kernels_end && ts.chunk.graph_id() >= 0) {
        RunAggregates::Span& span = batch_aggregates_.spans[{ts.chunk.step(), ts.chunk.graph_id(), track}];
        span.start = std::min(span.start, ts.kernels_start);
        span.end = std::max(span.end, ts.kernels_end);
      }
      for (int32_t op : ts.ops) ++batch_aggregates_.kernels[{ts.chunk.graph_id(), op}];
    }
    ts.kernels_start = INT64_MAX;
    ts.kernels_end = INT64_MIN;
    ts.ops.clear();
    ts.chunk.Reset(-1, -1);  // keeps its buffer for the next chunk
    return absl::OkStatus();
  }

  // The buckets TrackSummaries closed go into their groups; groups that are
  // done (or, at a flush, every group that changed) are written.
  absl::Status WriteClosed(TrackState& ts) {
    for (const internal::ClosedBucket& c : closed_) ts.groups.Add(c, &writes_);
    closed_.clear();
    return WriteGroups(ts);
  }

  absl::Status WriteGroups(TrackState& ts) {
    absl::Status st;
    for (internal::GroupWrite& w : writes_) {
      st = WriteGroup(ts, w);
      if (!st.ok()) break;
    }
    writes_.clear();
    return st;
  }

  absl::Status WriteGroup(TrackState& ts, internal::GroupWrite& w) {
    using Mode = internal::GroupWrite::Mode;
    if (w.mode == Mode::kReplace) return PutGroup(tl_.group_replace, current_track_, w.group);
    if (w.mode == Mode::kInsert) {
      if (absl::Status st = PutGroup(tl_.group_insert, current_track_, w.group); !st.ok()) return st;
      if (sqlite3_changes(db_) > 0) return absl::OkStatus();
      // The row was there after all (a writer before this one): merge into it.
    }
    Stmt& r = tl_.group_read;
    r.Int(1, run_id_); r.Int(2, w.group.level); r.Int(3, w.group.first_bucket); r.Int(4, current_track_);
    r.Int(5, w.group.depth);
    internal::SummaryGroup merged{w.group.level, w.group.depth, w.group.first_bucket, {}};
    absl::Status st;
    if (int rc = sqlite3_step(r.get()); rc == SQLITE_ROW) {
      st = internal::DecodeGroup(
          w.group.level, w.group.depth, w.group.first_bucket, sqlite3_column_int64(r.get(), 0),
          sqlite3_column_int64(r.get(), 1), sqlite3_column_int64(r.get(), 2),
          internal::ColumnView(r.get(), 3),
          &merged.buckets);
    } else if (rc != SQLITE_DONE) {
      st = absl::InternalError(internal::DbError(db_));
    }
    sqlite3_reset(r.get());
    if (!st.ok()) return st;
    for (const SummaryBucket& b : w.group.buckets) internal::AddToGroup(merged, b);
    if (st = PutGroup(tl_.group_replace, current_track_, merged); !st.ok()) return st;
    if (w.current) ts.groups.Adopt(merged);
    return absl::OkStatus();
  }

  absl::Status PutGroup(Stmt& s, int64_t track, const internal::SummaryGroup& g) {
    if (g.buckets.empty()) {  // everything it held was trimmed away
      Stmt& d = tl_.group_delete;
      d.Int(1, run_id_); d.Int(2, g.level); d.Int(3, g.first_bucket); d.Int(4, track); d.Int(5, g.depth);
      return d.Run();
    }
    internal::GroupRow row = internal::EncodeGroup(g);
    s.Int(1, run_id_); s.Int(2, track); s.Int(3, g.level); s.Int(4, g.depth); s.Int(5, row.first_bucket);
    s.Int(6, static_cast<int64_t>(g.buckets.size())); s.Int(7, row.slice_base); s.Int(8, row.step_base);
    s.Text(9, row.text);
    return s.Run();
  }

  // Writes every open chunk and, with `summaries`, every open summary bucket:
  // readers see all recorded so far. (A bucket written open is merged with
  // what it gains later, so this costs an upsert per open bucket: at a step's
  // end the writer does it at most once a second, not every step.)
  absl::Status FlushOpen(bool summaries = true) {
    std::vector<int64_t> ids;
    ids.reserve(tracks_.size());
    for (const auto& [track, ts] : tracks_)
      if (summaries || !ts.chunk.empty()) ids.push_back(track);
    std::sort(ids.begin(), ids.end());
    for (int64_t track : ids) {
      TrackState& ts = Touch(track);
      current_track_ = track;
      if (!ts.chunk.empty())
        if (absl::Status st = EmitChunk(track, ts); !st.ok()) return st;
      if (!summaries) continue;
      ts.summaries.CloseAll(&closed_);
      if (absl::Status st = WriteClosed(ts); !st.ok()) return st;
      ts.groups.TakeDirty(&writes_);
      if (absl::Status st = WriteGroups(ts); !st.ok()) return st;
    }
    if (summaries) summaries_flushed_ = std::chrono::steady_clock::now();
    return absl::OkStatus();
  }

  const std::string& ClockOf(int64_t track) {
    auto it = track_clock_.find(track);
    if (it != track_clock_.end()) return it->second;
    std::string clock;
    Stmt& q = tl_.track_clock;
    q.Int(1, run_id_); q.Int(2, track);
    if (sqlite3_step(q.get()) == SQLITE_ROW && sqlite3_column_text(q.get(), 0))
      clock = reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 0));
    sqlite3_reset(q.get());
    return track_clock_[track] = clock;
  }

  // The file passed max_capture_bytes: the timeline stops here, and says so.
  void CheckCaptureCap() {
    if (max_capture_bytes_ <= 0 || capture_stopped_ || run_id_ == 0) return;
    int64_t pages = 0;
    if (sqlite3_step(tl_.page_count.get()) == SQLITE_ROW) pages = sqlite3_column_int64(tl_.page_count.get(), 0);
    sqlite3_reset(tl_.page_count.get());
    if (pages * page_size_ < max_capture_bytes_) return;
    capture_stopped_ = true;
    stopped_at_step_ = last_step_ + 1;
  }

  // runs.capture_note: the producer's notes, then the writer's own.
  absl::Status WriteCaptureNote() {
    std::vector<std::string> parts = notes_;
    if (!ring_note_.empty()) parts.push_back(ring_note_);
    if (capture_stopped_) {
      parts.push_back(absl::StrCat("timeline capture stopped at step ", stopped_at_step_, ": the file reached the ",
                                   absl::StrFormat("%.1f", max_capture_bytes_ / 1048576.0), " MB capture limit; ",
                                   not_captured_, " later slices and counters were not recorded"));
    }
    if (parts.empty()) return absl::OkStatus();
    Stmt& s = own_.capture_note;
    s.Int(1, run_id_); s.Text(2, absl::StrJoin(parts, "; "));
    return s.Run();
  }

  absl::Status WriteOne(const FlushMark&) { return FlushOpen(); }
  absl::Status WriteOne(const TrackEnd& e) {
    if (!tracks_.count(e.track_id)) return absl::OkStatus();
    TrackState& ts = Touch(e.track_id);  // a rolled-back batch puts the state back
    current_track_ = e.track_id;
    if (!ts.chunk.empty())
      if (absl::Status st = EmitChunk(e.track_id, ts); !st.ok()) return st;
    ts.summaries.CloseAll(&closed_);
    if (absl::Status st = WriteClosed(ts); !st.ok()) return st;
    ts.groups.TakeDirty(&writes_);
    if (absl::Status st = WriteGroups(ts); !st.ok()) return st;
    tracks_.erase(e.track_id);
    return absl::OkStatus();
  }
  absl::Status WriteOne(const SliceBatch& b) {
    for (const trace::SliceRecord& r : b.slices)
      if (absl::Status st = WriteOne(r); !st.ok()) return st;
    return absl::OkStatus();
  }
  absl::Status WriteOne(const CaptureNote& n) {
    notes_.push_back(n.text);
    return Tag(WriteCaptureNote(), "runs", run_id_);
  }
  absl::Status WriteOne(const AbandonReason& a) {
    abandon_reason_ = a.text;
    return absl::OkStatus();
  }
  absl::Status WriteOne(const ConfigField& f) {
    Stmt& s = own_.config_field;
    s.Int(1, run_id_); s.Text(2, absl::StrCat("$.", f.key)); s.Text(3, f.json);
    return Tag(s.Run(), "runs", run_id_);
  }

  // The ring trim of the level of detail: per clock, groups that end before
  // the first kept step go, groups that straddle it lose the buckets before
  // it, in the file and in memory alike.
  absl::Status TrimSummaries(int64_t last_dropped_step) {
    std::vector<std::pair<std::string, int64_t>> cuts;
    {
      Stmt q;
      if (absl::Status st = q.Prepare(db_, "SELECT clock, min(start_ns) FROM step_bounds WHERE run_id = ?1 AND step > ?2"
                                           " GROUP BY clock");
          !st.ok())
        return st;
      q.Int(1, run_id_); q.Int(2, last_dropped_step);
      while (sqlite3_step(q.get()) == SQLITE_ROW)
        cuts.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 0)), sqlite3_column_int64(q.get(), 1));
    }
    for (const auto& [clock, cut] : cuts) {
      constexpr char kOfClock[] = " run_id = ?1 AND track_id IN (SELECT track_id FROM tracks WHERE run_id = ?1 AND clock = ?2)";
      Stmt whole, part;
      if (absl::Status st = whole.Prepare(
              db_, absl::StrCat("DELETE FROM slice_summary_groups WHERE", kOfClock, " AND ((first_bucket + ",
                                internal::kGroupBuckets, ") << (", internal::SummaryShift(0), " + 2 * level)) <= ?3"));
          !st.ok())
        return st;
      whole.Int(1, run_id_); whole.Text(2, clock); whole.Int(3, cut);
      if (absl::Status st = whole.Run(); !st.ok()) return st;
      if (absl::Status st = part.Prepare(
              db_, absl::StrCat("SELECT track_id, level, depth, first_bucket, slice_base, step_base, count, buckets"
                                " FROM slice_summary_groups WHERE", kOfClock, " AND (first_bucket << (",
                                internal::SummaryShift(0), " + 2 * level)) < ?3"));
          !st.ok())
        return st;
      part.Int(1, run_id_); part.Text(2, clock); part.Int(3, cut);
      std::vector<std::pair<int64_t, internal::SummaryGroup>> kept;
      int rc;
      while ((rc = sqlite3_step(part.get())) == SQLITE_ROW) {
        sqlite3_stmt* r = part.get();
        internal::SummaryGroup g{static_cast<int>(sqlite3_column_int64(r, 1)),
                                 static_cast<int16_t>(sqlite3_column_int64(r, 2)), sqlite3_column_int64(r, 3), {}};
        absl::Status st = internal::DecodeGroup(
            g.level, g.depth, g.first_bucket, sqlite3_column_int64(r, 4), sqlite3_column_int64(r, 5),
            sqlite3_column_int64(r, 6),
            internal::ColumnView(r, 7), &g.buckets);
        if (!st.ok()) return st;
        std::erase_if(g.buckets, [&](const SummaryBucket& b) { return b.start_ns + b.width_ns <= cut; });
        kept.emplace_back(sqlite3_column_int64(r, 0), std::move(g));
      }
      if (rc != SQLITE_DONE) return absl::InternalError(internal::DbError(db_));
      part = Stmt();
      for (const auto& [track, g] : kept)
        if (absl::Status st = PutGroup(tl_.group_replace, track, g); !st.ok()) return st;
      std::vector<int64_t> ids;
      for (const auto& [track, ts] : tracks_)
        if (ClockOf(track) == clock) ids.push_back(track);
      for (int64_t track : ids) Touch(track).groups.DropBefore(cut);
    }
    return absl::OkStatus();
  }

  // --trace-ring: step `step` ended; the timeline of steps before the ring goes.
  absl::Status TrimRing(int64_t step) {
    const int64_t cut = step - ring_steps_;  // steps <= cut are dropped
    if (ring_steps_ <= 0 || cut < 0 || cut <= trimmed_through_) return absl::OkStatus();
    const std::string run = absl::StrCat(run_id_), last = absl::StrCat(cut);
    // Buckets that end before the first kept step's start, per clock; a
    // bucket straddling the cut keeps what it counted (the note says so).
    if (absl::Status st = TrimSummaries(cut); !st.ok()) return st;
    absl::Status st = internal::Exec(
        db_, absl::StrCat(" DELETE FROM slice_chunks WHERE run_id = ", run, " AND step <= ", last, ";"
                          " DELETE FROM step_bounds WHERE run_id = ", run, " AND step <= ", last, ";"));
    if (!st.ok()) return st;
    trimmed_through_ = cut;
    ring_note_ = absl::StrCat("timeline kept for the last ", ring_steps_, " steps only (a ring): steps up to ", cut,
                              " were dropped; coarse level-of-detail buckets that span the cut still count them");
    return WriteCaptureNote();
  }

  absl::Status WriteOne(const trace::GraphRecord& r) {
    Stmt& s = stmts_.graph;
    s.Int(1, run_id_); s.Int(2, r.graph_id); s.Text(3, r.fingerprint); s.Text(4, r.call_site);
    s.Text(5, r.ir_text); s.Text(6, r.ir_text_after); s.Int(7, r.op_count); s.Real(8, r.flops);
    s.Int(9, r.bytes);
    return Tag(s.Run(), "graphs", r.graph_id);
  }
  absl::Status WriteOne(const trace::MemoryPlanRecord& r) {
    Stmt& s = stmts_.memory_plan;
    s.Int(1, run_id_); s.Int(2, r.graph_id); s.Int(3, r.peak_bytes); s.Int(4, r.parameter_bytes);
    s.Int(5, r.arena_bytes); s.Int(6, r.unshared_bytes); s.Text(7, r.peak_op);
    if (absl::Status st = Tag(s.Run(), "memory_plans", r.graph_id); !st.ok()) return st;
    for (const auto& b : r.live_at_peak) {
      Stmt& p = stmts_.peak_buffer;
      p.Int(1, run_id_); p.Int(2, r.graph_id); p.Int(3, b.rank); p.Int(4, b.op_id); p.Text(5, b.op);
      p.Int(6, b.bytes); p.Int(7, b.input ? 1 : 0); p.TextOrNull(8, b.source_file);
      b.source_file.empty() ? p.Null(9) : p.Int(9, b.source_line);
      p.TextOrNull(10, b.scope);
      if (absl::Status st = Tag(p.Run(), "peak_buffers", r.graph_id); !st.ok()) return st;
    }
    if (!r.curve_live_bytes.empty() && r.curve_live_bytes.size() == r.curve_op_ids.size()) {
      // Two JSON arrays: a few bytes a point, and SQL reads them with json_each.
      Stmt& c = stmts_.memory_curve;
      c.Int(1, run_id_); c.Int(2, r.graph_id); c.Int(3, static_cast<int64_t>(r.curve_live_bytes.size()));
      c.Text(4, absl::StrCat("[", absl::StrJoin(r.curve_op_ids, ","), "]"));
      c.Text(5, absl::StrCat("[", absl::StrJoin(r.curve_live_bytes, ","), "]"));
      if (absl::Status st = Tag(c.Run(), "memory_curves", r.graph_id); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

  absl::Status WriteOne(const trace::PassRecord& r) {
    Stmt& s = stmts_.pass;
    s.Int(1, run_id_); s.Int(2, r.graph_id); s.Text(3, r.pass); s.Int(4, r.changed); s.Int(5, r.ops_after);
    return Tag(s.Run(), "compile_passes", r.graph_id);
  }
  absl::Status WriteOne(const trace::FusionRecord& r) {
    for (const auto& e : r.edges) {
      Stmt& s = stmts_.fusion_edge;
      s.Int(1, run_id_); s.Int(2, r.graph_id); s.Int(3, e.consumer_op_id); s.Int(4, e.producer_op_id);
      s.Text(5, e.consumer); s.Text(6, e.producer); s.Int(7, e.fused ? 1 : 0); s.TextOrNull(8, e.kernel);
      s.Text(9, e.reason); s.TextOrNull(10, e.source_file);
      e.source_file.empty() ? s.Null(11) : s.Int(11, e.source_line);
      s.TextOrNull(12, e.scope);
      if (absl::Status st = Tag(s.Run(), "fusion_decisions", r.graph_id); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

  // The id of `text` in this run's sharding_texts, added when new.
  absl::StatusOr<int64_t> ShardingId(const std::string& text) {
    if (sharding_ids_run_ != run_id_) {
      sharding_ids_.clear();
      sharding_ids_run_ = run_id_;
    }
    if (auto it = sharding_ids_.find(text); it != sharding_ids_.end()) return it->second;
    // A run this writer did not begin (a resumed one) may hold it already.
    Stmt& f = stmts_.sharding_find;
    f.Int(1, run_id_); f.Text(2, text);
    int64_t id = 0;
    if (sqlite3_step(f.get()) == SQLITE_ROW) id = sqlite3_column_int64(f.get(), 0);
    sqlite3_reset(f.get());
    if (id == 0) {
      Stmt& n = stmts_.sharding_next;
      n.Int(1, run_id_);
      if (sqlite3_step(n.get()) == SQLITE_ROW) id = sqlite3_column_int64(n.get(), 0);
      sqlite3_reset(n.get());
      if (id == 0) return absl::InternalError(internal::DbError(db_));
      Stmt& s = stmts_.sharding_text;
      s.Int(1, run_id_); s.Int(2, id); s.Text(3, text);
      if (absl::Status st = s.Run(); !st.ok()) return st;
    }
    sharding_ids_.emplace(text, id);
    return id;
  }

  absl::Status WriteOne(const trace::ShardingRecord& r) {
    for (const auto& d : r.decisions) {
      auto sharding = ShardingId(d.sharding);
      if (!sharding.ok()) return Tag(sharding.status(), "sharding_texts", r.graph_id);
      Stmt& s = stmts_.decision;
      s.Int(1, run_id_); s.Int(2, r.graph_id); s.Int(3, d.op_id); s.Text(4, d.name); s.Int(5, *sharding);
      s.Text(6, d.source); s.TextOrNull(7, d.via); s.TextOrNull(8, d.source_file);
      d.source_file.empty() ? s.Null(9) : s.Int(9, d.source_line);
      s.IntOrNull(10, d.from_op_id);
      if (absl::Status st = Tag(s.Run(), "sharding_decisions", r.graph_id); !st.ok()) return st;
    }
    for (size_t k = 0; k < r.rematerializations.size(); ++k) {
      const auto& m = r.rematerializations[k];
      Stmt& s = stmts_.remat;
      s.Int(1, run_id_); s.Int(2, r.graph_id); s.Int(3, static_cast<int64_t>(k)); s.Int(4, m.op_id);
      s.Text(5, m.value); s.Text(6, m.op); s.Int(7, m.bytes); s.TextOrNull(8, m.source_file);
      m.source_file.empty() ? s.Null(9) : s.Int(9, m.source_line);
      if (absl::Status st = Tag(s.Run(), "rematerializations", r.graph_id); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

  absl::Status WriteOne(const trace::AutoShardingRecord& r) {
    Stmt& s = stmts_.auto_search;
    s.Int(1, run_id_); s.Int(2, r.step); s.Text(3, r.method); s.Real(4, r.combinations); s.Int(5, r.evaluations);
    s.Int(6, r.search_ns); s.Text(7, r.profile); s.Int(8, r.memory_budget);
    if (absl::Status st = Tag(s.Run(), "auto_sharding", r.step); !st.ok()) return st;
    for (const auto& c : r.candidates) {
      Stmt& q = stmts_.auto_candidate;
      q.Int(1, run_id_); q.Int(2, r.step); q.Text(3, c.strategy); q.Real(4, c.modeled_ns); q.Real(5, c.collective_ns);
      q.Int(6, c.collectives); q.Int(7, c.peak_bytes); q.Int(8, c.fits); q.Int(9, c.rematerializations);
      q.Int(10, c.chosen);
      if (absl::Status st = Tag(q.Run(), "auto_sharding_candidates", r.step); !st.ok()) return st;
    }
    for (const auto& c : r.choices) {
      Stmt& q = stmts_.auto_choice;
      q.Int(1, run_id_); q.Int(2, r.step); q.Text(3, c.group); q.Int(4, c.tensors); q.Text(5, c.layout);
      q.Text(6, c.sharding);
      if (absl::Status st = Tag(q.Run(), "auto_sharding_choices", r.step); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

  absl::Status WriteOne(const trace::OpRecord& r) {
    Stmt& s = stmts_.op;
    s.Int(1, run_id_); s.Int(2, r.graph_id); s.Int(3, r.op_id); s.Text(4, r.name);
    s.Text(5, r.opcode); s.Text(6, r.shape); s.Real(7, r.flops); s.Int(8, r.bytes_read);
    s.Int(9, r.bytes_written); s.Int(10, r.modeled_ns);
    s.Text(11, r.roofline.empty() ? "none" : r.roofline); s.Text(12, r.profile);
    s.TextOrNull(13, r.source_file);
    r.source_file.empty() ? s.Null(14) : s.Int(14, r.source_line);
    s.TextOrNull(15, r.scope);
    s.IntOrNull(16, r.moves_op_id);
    return Tag(s.Run(), "ops", r.op_id);
  }
  absl::Status WriteOne(const trace::CompilationRecord& r) {
    Stmt& s = stmts_.compilation;
    s.Int(1, run_id_); s.Int(2, r.compile_id); s.Int(3, r.step); s.Int(4, r.graph_id);
    s.Text(5, r.cache); s.TextOrNull(6, r.cause_kind); s.TextOrNull(7, r.cause_detail);
    s.TextOrNull(8, r.source_file);
    r.source_file.empty() ? s.Null(9) : s.Int(9, r.source_line);
    s.Int(10, r.duration_ns); s.IntOrNull(11, r.prev_graph_id); s.Text(12, r.call_site);
    s.Int(13, r.host_start_ns);
    s.TextOrNull(14, r.cause_subkind);
    r.diff.empty() ? s.Null(15) : s.Int(15, r.diff_total);
    if (absl::Status st = Tag(s.Run(), "compilations", r.compile_id); !st.ok()) return st;
    for (size_t k = 0; k < r.diff.size(); ++k) {
      const trace::CompileDiffOp& o = r.diff[k];
      Stmt& d = stmts_.compile_diff;
      d.Int(1, run_id_); d.Int(2, r.compile_id); d.Int(3, static_cast<int64_t>(k)); d.Text(4, o.change);
      d.Text(5, o.opcode); d.Int(6, o.op_index); d.TextOrNull(7, o.what); d.TextOrNull(8, o.source_file);
      o.source_file.empty() ? d.Null(9) : d.Int(9, o.source_line);
      d.TextOrNull(10, o.via);
      if (absl::Status st = Tag(d.Run(), "compile_diffs", r.compile_id); !st.ok()) return st;
    }
    return absl::OkStatus();
  }
  absl::Status WriteOne(const trace::ExecutionRecord& r) {
    Stmt& s = stmts_.execution;
    s.Int(1, run_id_); s.Int(2, r.execution_id); s.Int(3, r.step); s.Int(4, r.graph_id);
    s.Text(5, r.cache); s.Text(6, r.input_signature.empty() ? "[]" : r.input_signature);
    s.Text(7, r.cause); s.TextOrNull(8, r.source_file);
    r.source_file.empty() ? s.Null(9) : s.Int(9, r.source_line);
    s.Int(10, r.host_start_ns); s.Int(11, r.host_dur_ns);
    return Tag(s.Run(), "executions", r.execution_id);
  }
  // A step ended: its timeline is written with its row, in one transaction,
  // so a reader never sees the step without its slices (or half of them).
  absl::Status WriteOne(const trace::StepRecord& r) {
    const bool summaries = std::chrono::steady_clock::now() - summaries_flushed_ >= std::chrono::seconds(1);
    if (absl::Status st = FlushOpen(summaries); !st.ok()) return Tag(st, "slice_chunks", r.step);
    if (capture_stopped_)
      if (absl::Status st = WriteCaptureNote(); !st.ok()) return Tag(st, "runs", r.step);
    Stmt& s = stmts_.step;
    s.Int(1, run_id_);
    s.Int(2, r.step);
    s.Int(4, r.wall_ns);
    // A simulated run computes no values: its losses are unknown, not 0.
    // SQLite stores a NaN as NULL, which reads as "no loss": a diverged
    // step's NaN is kept as the text 'NaN' (Inf is a REAL SQLite keeps).
    if (simulated_ || !r.has_loss)
      s.Null(3);
    else if (std::isnan(r.loss))
      s.Text(3, "NaN");
    else
      s.Real(3, r.loss);
    if (!r.has_eval_loss || simulated_)
      s.Null(5);
    else if (std::isnan(r.eval_loss))
      s.Text(5, "NaN");  // as the loss: NULL would read as not measured
    else
      s.Real(5, r.eval_loss);
    if (absl::Status st = Tag(s.Run(), "steps", r.step); !st.ok()) return st;
    last_step_ = std::max<int64_t>(last_step_, r.step);
    return Tag(TrimRing(r.step), "slice_chunks", r.step);
  }
  absl::Status WriteOne(const trace::TensorRecord& r) {
    Stmt& s = stmts_.tensor;
    s.Int(1, run_id_); s.Int(2, r.tensor_id); s.Text(3, r.name); s.Text(4, r.shape);
    s.Text(5, r.dtype); s.Text(6, r.sharding); s.Text(7, r.sharding_source);
    s.TextOrNull(8, r.source_file);
    r.source_file.empty() ? s.Null(9) : s.Int(9, r.source_line);
    s.Int(10, r.step);
    return Tag(s.Run(), "tensors", r.tensor_id);
  }
  absl::Status WriteOne(const trace::ShardPlacementRecord& r) {
    Stmt& s = stmts_.placement;
    s.Int(1, run_id_); s.Int(2, r.tensor_id); s.Text(3, r.tensor_name); s.Int(4, r.device_id);
    s.Int(5, std::max(r.device_id, r.last_device_id)); s.Text(6, r.index_ranges); s.Int(7, r.bytes);
    return Tag(s.Run(), "shard_placement_spans", r.tensor_id);
  }
  absl::Status WriteOne(const trace::HangRecord& r) {
    Stmt& s = stmts_.hang;
    s.Int(1, run_id_); s.Int(2, r.step); s.Int(3, r.device_id); s.Int(4, r.host_id); s.Int(5, r.graph_id);
    s.TextOrNull(6, r.collective);
    s.Text(7, absl::StrCat("[", absl::StrJoin(r.waiting, ","), "]"));
    s.Text(8, r.message);
    return Tag(s.Run(), "hangs", r.device_id);
  }
  absl::Status WriteOne(const trace::CounterRecord& r) {
    if (capture_stopped_) {
      ++not_captured_;
      return absl::OkStatus();
    }
    Stmt& s = stmts_.counter;
    s.Int(1, run_id_); s.IntOrNull(2, r.device_id); s.Text(3, r.name); s.Int(4, r.ts_ns);
    s.Real(5, r.value);
    return Tag(s.Run(), "counters", r.ts_ns);
  }

  sqlite3* db_ = nullptr;
  Stmts stmts_;
  struct TimelineStmts {
    Stmt chunk, group_insert, group_replace, group_read, group_delete, bounds, track_clock, page_count;
  } tl_;
  std::unordered_map<int64_t, TrackState> tracks_;
  std::unordered_map<int64_t, std::optional<TrackState>> snapshots_;
  // What the run's end needs of its slices (store/metrics.h): the committed
  // part, and the part of the batch being written (merged when it commits).
  RunAggregates aggregates_, batch_aggregates_;
  bool aggregates_exact_ = true;
  std::unordered_map<int64_t, std::string> track_clock_;
  std::vector<internal::ClosedBucket> closed_;
  std::vector<internal::GroupWrite> writes_;
  int64_t current_track_ = 0;  // the track closed_ belongs to
  int ring_steps_ = 0;
  int64_t max_capture_bytes_ = 0, page_size_ = 4096;
  bool capture_stopped_ = false;
  int64_t not_captured_ = 0, stopped_at_step_ = 0, last_step_ = -1, trimmed_through_ = -1;
  std::vector<std::string> notes_;  // AddCaptureNote's
  std::chrono::steady_clock::time_point summaries_flushed_{};
  std::string ring_note_;
  std::unordered_map<std::string, int64_t> names_;
  int64_t run_id_ = 0;
  std::unordered_map<std::string, int64_t> sharding_ids_;  // of run sharding_ids_run_
  int64_t sharding_ids_run_ = 0;
  // The run_writers statements: who writes the run, its heartbeat, its end.
  struct RunWriterStmts {
    Stmt writer_begin, heartbeat, writer_end, writer_close, capture_note, config_field;
  } own_;
  bool run_ended_ = false;
  bool interrupted_ = false;  // a signal ended the run: checkpoint after this batch commits
  bool left_for_signal_ = false;  // and did: the process is about to die, nothing more is written
  int64_t lost_ = 0;       // records of the current run that did not reach the file
  bool gapped_ = false;    // a batch of the current run was lost: its later records are dropped
  std::string loss_note_;  // why the first of them did not
  std::string abandon_reason_;  // SetAbandonReason's (or the hang detector's end), written at Close
  bool simulated_ = false;      // the current run computes no values (no losses)
  ProcessIdentity me_;
  std::string token_;
};

absl::Status CheckWritableDbPath(const std::string& path) {
  // What SQLite would only call "unable to open database file" or "a readonly
  // database": a directory that is not there or not writable (the
  // write-ahead log lives beside the file), a file that is read-only.
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open ", path, " for writing: the directory ", dir, " does not exist"));
  if (access(dir.c_str(), W_OK) != 0)
    return absl::InvalidArgumentError(absl::StrCat("cannot open ", path, " for writing: the directory ", dir,
                                                   " is not writable (", std::strerror(errno),
                                                   "; the database keeps its write-ahead log beside it)"));
  if (access(path.c_str(), F_OK) == 0 && access(path.c_str(), W_OK) != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open ", path, " for writing: the file is read-only (", std::strerror(errno), ")"));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Writer>> Writer::Open(const std::string& path, WriterOptions options) {
  auto db = std::make_unique<Db>();
  if (absl::Status st = db->Open(path, options); !st.ok()) return st;
  return std::unique_ptr<Writer>(new Writer(path, std::move(db), std::move(options)));
}

namespace {

// Writers alive in this process, for a crash or exit() to flush: lock-free
// slots, as a signal handler reads them.
constexpr int kLiveWriters = 16;
std::array<std::atomic<Writer*>, kLiveWriters> g_live_writers{};
std::atomic<bool> g_flushed_for_death{false};
std::terminate_handler g_previous_terminate = nullptr;
constexpr int kDeathSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct sigaction g_previous_action[std::size(kDeathSignals)];

void FlushLiveWriters(std::chrono::milliseconds budget) {
  if (g_flushed_for_death.exchange(true)) return;  // once: terminate then abort would come twice
  for (auto& slot : g_live_writers)
    if (Writer* w = slot.load()) w->FlushWithin(budget);
}

// Best effort in a signal handler: the writer's own thread does the writing;
// this one queues a flush and waits a bounded time (a fault inside the
// allocator could stop it; the wait's bound still lets the process die).
extern "C" void OnDeathSignal(int sig) {
  FlushLiveWriters(std::chrono::milliseconds(1500));
  for (size_t i = 0; i < std::size(kDeathSignals); ++i)
    if (kDeathSignals[i] == sig) sigaction(sig, &g_previous_action[i], nullptr);
  raise(sig);
}

void OnTerminate() {
  FlushLiveWriters(std::chrono::milliseconds(3000));
  if (g_previous_terminate) g_previous_terminate();
  std::abort();
}

// Ctrl-C, `kill`, a closed terminal: the run ends as 'interrupted' with all
// it recorded, then the signal takes its default course (the exit status
// says so). The handler only writes the signal to a pipe, as a handler may
// not lock or allocate where the signal found the program; a thread of ours
// ends the runs. A second signal, or one in a forked child, acts at once.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
int g_stop_pipe[2] = {-1, -1};
pid_t g_stop_owner = 0;
std::atomic<bool> g_stopping{false};

// Raised again at its default, it acts once the handler returns (it is
// blocked while the handler runs): the handler must return at once.
extern "C" void OnStopSignal(int sig) {
  const int saved = errno;
  // A forked child (its parent's pipe is inherited: never written to) or a second signal.
  if (getpid() != g_stop_owner || g_stopping.exchange(true)) {
    signal(sig, SIG_DFL);
    raise(sig);
    errno = saved;
    return;
  }
  const unsigned char b = static_cast<unsigned char>(sig);
  if (write(g_stop_pipe[1], &b, 1) != 1) {
    signal(sig, SIG_DFL);
    raise(sig);
  }
  errno = saved;
}

// The stop signals blocked on the calling thread (ours: the watcher, the
// writers), so they go to the program's threads, as a program that waits
// for them with sigwait expects.
void BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kStopSignals) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// Held by the watcher while it ends the writers' runs and by a writer's
// destructor while it leaves its slot: no writer is freed under the watcher.
std::mutex g_watcher_mu;

const char* StopSignalText(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT (Ctrl-C)";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP (its terminal closed)";
  }
  return "a signal";
}

void WatchStopSignals() {
  unsigned char b = 0;
  ssize_t n;
  while ((n = read(g_stop_pipe[0], &b, 1)) < 0 && errno == EINTR) {
  }
  if (n != 1) return;
  const int sig = b;
  {
    std::lock_guard<std::mutex> l(g_watcher_mu);
    if (!g_flushed_for_death.exchange(true))
      for (auto& slot : g_live_writers)
        if (Writer* w = slot.load())
          w->EndRunInterruptedWithin(StopSignalText(sig), std::chrono::seconds(3));
  }
  signal(sig, SIG_DFL);
  kill(getpid(), sig);
}

void InstallStopHandlers() {
  if (pipe2(g_stop_pipe, O_CLOEXEC) != 0) return;
  g_stop_owner = getpid();
  // The watcher first: a handler with no one reading its pipe would swallow Ctrl-C.
  try {
    std::thread([] {
      BlockStopSignals();
      WatchStopSignals();
    }).detach();
  } catch (const std::exception&) {
    return;
  }
  for (int sig : kStopSignals) {
    struct sigaction now {};
    if (sigaction(sig, nullptr, &now) != 0 || now.sa_handler != SIG_DFL) continue;  // the program's own, or ignored
    struct sigaction sa {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, nullptr);
  }
}

void InstallDeathHandlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    InstallStopHandlers();
    std::atexit([] { FlushLiveWriters(std::chrono::milliseconds(5000)); });
    g_previous_terminate = std::set_terminate(OnTerminate);
    for (size_t i = 0; i < std::size(kDeathSignals); ++i) {
      struct sigaction sa {};
      sa.sa_handler = OnDeathSignal;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_NODEFER;
      sigaction(kDeathSignals[i], &sa, &g_previous_action[i]);
    }
  });
}

}  // namespace

Writer::Writer(std::string path, std::unique_ptr<Db> db, WriterOptions options)
    : path_(std::move(path)), db_(std::move(db)), options_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
  owner_pid_ = getpid();
  InstallDeathHandlers();
  for (auto& slot : g_live_writers) {
    Writer* none = nullptr;
    if (slot.compare_exchange_strong(none, this)) break;
  }
}

bool Writer::FlushWithin(std::chrono::milliseconds budget) { return PushWithin(FlushMark{}, budget); }

bool Writer::EndRunInterruptedWithin(std::string note, std::chrono::milliseconds budget) {
  if (run_id_.load() == 0) return FlushWithin(budget);
  return PushWithin(RunEnd{UnixNowNs(), "interrupted", std::move(note)}, budget);
}

bool Writer::PushWithin(Item item, std::chrono::milliseconds budget) {
  if (getpid() != owner_pid_) return false;  // a forked child: the writer thread is the parent's
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + budget;
  std::unique_lock<std::mutex> l(mu_, std::defer_lock);
  while (!l.try_lock()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (stop_) return true;
  queue_.push_back(std::move(item));
  const uint64_t seq = ++enqueued_;
  ++waiters_;  // no lingering for a fuller batch
  l.unlock();
  queued_cv_.notify_one();
  while (written_seen_.load() < seq) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

Writer::~Writer() {
  {
    std::lock_guard<std::mutex> l(g_watcher_mu);  // not while the watcher ends this writer's run
    for (auto& slot : g_live_writers) {
      Writer* self = this;
      if (slot.compare_exchange_strong(self, nullptr)) break;
    }
  }
  Push(FlushMark{});  // open chunks and summaries reach the file before it closes
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  queued_cv_.notify_all();
  thread_.join();  // the loop drains the queue before it returns
  db_->Close();
  db_.reset();
}

uint64_t Writer::Push(Item item) {
  uint64_t seq;
  bool wake;
  {
    std::unique_lock<std::mutex> l(mu_);
    written_cv_.wait(l, [&] { return queue_.size() < kMaxQueued || stop_; });
    queue_.push_back(std::move(item));
    seq = ++enqueued_;
    // Wake the thread only when work appears or a batch is full, not per record.
    wake = queue_.size() == 1 || queue_.size() == kBatch;
  }
  if (wake) queued_cv_.notify_one();
  return seq;
}

void Writer::WaitWritten(uint64_t seq) {
  std::unique_lock<std::mutex> l(mu_);
  ++waiters_;  // tells the thread not to linger for a fuller batch
  queued_cv_.notify_one();
  written_cv_.wait(l, [&] { return written_ >= seq; });
  --waiters_;
}

void Writer::Loop() {
  BlockStopSignals();  // a program's Ctrl-C goes to its own threads
  using Clock = std::chrono::steady_clock;
  const auto beat_every = std::chrono::milliseconds(std::max(1, options_.heartbeat_ms));
  auto next_beat = Clock::now() + beat_every;
  std::vector<Item> batch;
  for (;;) {
    uint64_t last;
    {
      std::unique_lock<std::mutex> l(mu_);
      queued_cv_.wait_until(l, next_beat, [&] { return !queue_.empty() || stop_; });
      if (queue_.empty()) {
        if (stop_) return;  // stopping, and nothing left to write
        l.unlock();
        db_->Heartbeat();  // idle, alive
        next_beat = Clock::now() + beat_every;
        continue;
      }
      // Linger briefly for a fuller batch: a commit per handful of records
      // would cost far more than the records themselves.
      queued_cv_.wait_for(l, kLinger,
                          [&] { return queue_.size() >= kBatch || stop_ || waiters_ > 0; });
      batch.swap(queue_);
      last = enqueued_;
    }
    written_cv_.notify_all();  // room in the queue again
    // One transaction per batch: the batch grows while the previous one commits.
    rows_written_.fetch_add(WriteBatch(batch));
    run_id_.store(db_->run_id());
    records_lost_.store(db_->lost());
    batch.clear();
    if (Clock::now() >= next_beat) {
      db_->Heartbeat();
      next_beat = Clock::now() + beat_every;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      written_ = last;
      written_seen_.store(last);
    }
    written_cv_.notify_all();
  }
}

int64_t Writer::WriteBatch(const std::vector<Item>& batch) {
  const int attempts = std::max(1, options_.batch_attempts);
  for (int attempt = 1;; ++attempt) {
    Db::BatchOutcome out = db_->WriteBatch(batch);
    if (out.st.ok()) {
      if (out.item_errors > 0) SetError(out.first_item_error, out.item_errors);
      return out.rows;
    }
    // Another process holds the write lock beyond the busy timeout: try the
    // whole batch again, a bounded number of times.
    if (absl::IsUnavailable(out.st) && attempt < attempts) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20 * attempt));
      continue;
    }
    db_->GiveUp(batch, out.st);
    const int64_t records = Db::Records(batch);
    std::string msg = absl::StrCat(out.st.message(), " (", records, records == 1 ? " record" : " records",
                                   " lost", attempt > 1 ? absl::StrCat(" after ", attempt, " attempts") : "", ")");
    if (absl::IsDataLoss(out.st)) absl::StrAppend(&msg, "; run `shardscope check ", path_, "` for details");
    SetError(absl::Status(out.st.code(), msg));
    return 0;
  }
}

void Writer::SetError(absl::Status st, int64_t count) {
  bool first = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    error_count_ += count;
    if (error_.ok()) {
      error_ = std::move(st);
      first = true;
    }
  }
  failed_.store(true);
  if (first && options_.on_error) options_.on_error(status());
}

absl::Status Writer::status() const {
  std::lock_guard<std::mutex> l(mu_);
  if (error_.ok()) return error_;
  std::string msg = absl::StrCat(path_, ": ", error_.message());
  if (error_count_ > 1) absl::StrAppend(&msg, " (and ", error_count_ - 1, " more write errors)");
  return absl::Status(error_.code(), msg);
}

void Writer::BeginRun(const trace::RunRecord& r) { StartRun(r).IgnoreError(); }

absl::StatusOr<int64_t> Writer::StartRun(const trace::RunRecord& r) {
  int64_t before = run_id_.load();
  WaitWritten(Push(RunBegin{r}));
  int64_t id = run_id_.load();
  if (id == 0 || id == before) {
    absl::Status st = status();
    return st.ok() ? absl::InternalError(absl::StrCat(path_, ": the run was not recorded")) : st;
  }
  return id;
}

void Writer::Flush() { WaitWritten(Push(FlushMark{})); }

void Writer::EndRun() { WaitWritten(Push(RunEnd{UnixNowNs(), "", ""})); }

void Writer::EndRunByHangDetector(std::string message) {
  WaitWritten(Push(RunEnd{UnixNowNs(), "hang detected", std::move(message)}));
}

void Writer::EndRunFailed(std::string message) {
  WaitWritten(Push(RunEnd{UnixNowNs(), "failed", std::move(message)}));
}

absl::Status Writer::FlushAndCheck() {
  Flush();
  return status();
}

absl::Status Writer::EndRunAndCheck() {
  EndRun();
  return status();
}

}  // namespace shardscope::store
