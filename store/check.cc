// `shardscope check` (see check.h).
#include "store/check.h"

#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "store/index_ranges.h"
#include "store/reader.h"
#include "store/run_state.h"
#include "store/schema.h"
#include "store/slice_chunks.h"
#include "store/slice_vtab.h"
#include "store/sqlite_util.h"

namespace shardscope::store {
namespace {

using internal::Stmt;

// The tables and columns of the first version-1 schema: every shardscope
// file has them, so a file without one is damaged. Later additions (tables,
// columns, views) are added by a writer when it opens an older file, so a
// file without them is only old.
constexpr std::pair<const char*, const char*> kRequired[] = {
    {"meta", "key value"},
    {"runs",
     "run_id sample mesh mesh_axes sharding config_json topology profile clock_kinds tool_version schema_version "
     "simulated num_hosts num_devices started_at started_at_ns ended_at_ns status"},
    {"hosts", "run_id host_id name"},
    {"devices", "run_id device_id host_id coords hbm_bytes peak_flops"},
    {"meshes", "run_id mesh_id shape axis_names device_ids"},
    {"names", "name_id name"},
    {"tracks", "run_id track_id name clock device_id host_id thread_name"},
    {"slices", "run_id slice_id track_id start_ns dur_ns depth parent_id name_id kind step graph_id op_id flow_id bytes"},
    {"graphs", "run_id graph_id fingerprint call_site ir_text ir_text_after op_count flops bytes"},
    {"compilations",
     "run_id compile_id step graph_id cache cause_kind cause_detail source_file source_line duration_ns "
     "prev_graph_id call_site host_start_ns"},
    {"executions",
     "run_id execution_id step graph_id cache input_signature cause source_file source_line host_start_ns "
     "host_dur_ns"},
    {"steps", "run_id step loss wall_ns"},
    {"tensors", "run_id tensor_id name shape dtype sharding sharding_source source_file source_line step"},
    {"shard_placements", "run_id tensor_id tensor_name device_id index_ranges bytes"},
    {"counters", "run_id device_id name ts_ns value"},
};

// Rows of one table that point at rows another table lacks, per run.
struct Reference {
  const char* table;   // the referring table (checked only when both exist)
  const char* target;  // the table referred to
  const char* what;    // "slices refer to tracks"
  const char* sql;     // run_id, count(*) of dangling rows, grouped by run
};
constexpr Reference kReferences[] = {
    {"slices", "tracks", "slices on tracks that are not in `tracks`",
     "SELECT s.run_id, count(*) FROM slices s WHERE NOT EXISTS (SELECT 1 FROM tracks t WHERE t.run_id = s.run_id"
     " AND t.track_id = s.track_id) GROUP BY s.run_id"},
    {"slices", "names", "slices whose name_id is not in `names`",
     "SELECT s.run_id, count(*) FROM slices s WHERE NOT EXISTS (SELECT 1 FROM names n WHERE n.name_id = s.name_id)"
     " GROUP BY s.run_id"},
    {"compilations", "graphs", "compilations of graphs that are not in `graphs`",
     "SELECT c.run_id, count(*) FROM compilations c WHERE NOT EXISTS (SELECT 1 FROM graphs g WHERE g.run_id ="
     " c.run_id AND g.graph_id = c.graph_id) GROUP BY c.run_id"},
    {"executions", "graphs", "executions of graphs that are not in `graphs`",
     "SELECT e.run_id, count(*) FROM executions e WHERE NOT EXISTS (SELECT 1 FROM graphs g WHERE g.run_id ="
     " e.run_id AND g.graph_id = e.graph_id) GROUP BY e.run_id"},
    {"ops", "graphs", "ops of graphs that are not in `graphs`",
     "SELECT o.run_id, count(*) FROM ops o WHERE NOT EXISTS (SELECT 1 FROM graphs g WHERE g.run_id = o.run_id"
     " AND g.graph_id = o.graph_id) GROUP BY o.run_id"},
    {"sharding_decision_rows", "sharding_texts", "sharding decisions whose sharding_id is not in `sharding_texts`",
     "SELECT d.run_id, count(*) FROM sharding_decision_rows d WHERE NOT EXISTS (SELECT 1 FROM sharding_texts t"
     " WHERE t.run_id = d.run_id AND t.sharding_id = d.sharding_id) GROUP BY d.run_id"},
    {"tracks", "devices", "device tracks of devices that are not in `devices`",
     "SELECT t.run_id, count(*) FROM tracks t WHERE t.device_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM devices d"
     " WHERE d.run_id = t.run_id AND d.device_id = t.device_id) GROUP BY t.run_id"},
};

std::string Text(sqlite3_stmt* s, int col) {
  const unsigned char* t = sqlite3_column_text(s, col);
  return t ? reinterpret_cast<const char*>(t) : "";
}

class Checker {
 public:
  Checker(sqlite3* db, CheckReport* r) : db_(db), r_(r) {}

  // Runs `sql`, calling `row` per result row; a failure is a problem.
  template <typename F>
  bool Each(const std::string& sql, F row) {
    Stmt s;
    absl::Status st = s.Prepare(db_, sql);
    int rc = st.ok() ? SQLITE_ROW : sqlite3_errcode(db_);
    while (st.ok() && (rc = sqlite3_step(s.get())) == SQLITE_ROW) row(s.get());
    if (rc != SQLITE_DONE) {
      r_->problems.push_back(absl::StrCat("cannot read it (", internal::DbError(db_), ") running: ", sql));
      return false;
    }
    return true;
  }

  // The file's tables (and views) and their columns.
  std::map<std::string, std::set<std::string>> Columns(bool views) {
    std::map<std::string, std::set<std::string>> out;
    Each(absl::StrCat("SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = ",
                      views ? "'view'" : "'table'"),
         [&](sqlite3_stmt* s) { out[Text(s, 0)].insert(Text(s, 1)); });
    return out;
  }

  sqlite3* db_;
  CheckReport* r_;
};

}  // namespace

CheckReport CheckDatabase(const std::string& path) {
  CheckReport r;
  r.path = path;
  if (absl::Status st = internal::CheckRegularFile(path, /*may_be_missing=*/false); !st.ok()) {
    r.problems.push_back(std::string(st.message()));
    return r;
  }
  // A stranger's -wal would be read as this file's: nothing below could be trusted.
  if (absl::Status st = internal::CheckFileHeader(path); !st.ok()) {
    r.problems.push_back(std::string(st.message()));
    if (absl::IsFailedPrecondition(st)) return r;
  }
  sqlite3* raw = nullptr;
  if (absl::Status st = internal::OpenForReading(path, 0, &raw); !st.ok()) {
    r.problems.push_back(std::string(st.message()));
    return r;
  }
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> db(raw, sqlite3_close);
  Checker c(db.get(), &r);

  // SQLite's own check: pages, b-trees, indexes against their tables.
  bool sqlite_ok = c.Each("PRAGMA integrity_check(100)", [&](sqlite3_stmt* s) {
    std::string line = Text(s, 0);
    if (line != "ok") r.problems.push_back(absl::StrCat("SQLite integrity check: ", line));
  });
  if (!sqlite_ok) {
    if ((sqlite3_errcode(db.get()) & 0xff) == SQLITE_NOTADB) {
      r.problems = {absl::StrCat(path, " is not an SQLite database, or its header is damaged (",
                                 internal::DbError(db.get()), ")")};
    }
    return r;
  }

  // A shardscope file of a version this build reads (not unfinished, not another tool's).
  int version = 0;
  if (absl::Status st = internal::CheckShardscopeDb(db.get(), path, /*allow_empty=*/false, &version); !st.ok()) {
    r.problems.push_back(std::string(st.message()));
    return r;
  }
  internal::InstallNativeSlices(db.get()).IgnoreError();  // else the JSON views answer, slower

  // Tables and columns: those every version has had are required.
  std::map<std::string, std::set<std::string>> tables = c.Columns(false);
  const std::map<std::string, std::set<std::string>> file_views = c.Columns(true);
  // Schema version 2 keeps slices in chunks behind a `slices` view.
  const bool chunked = tables.count("slice_chunks") > 0;
  if (chunked && !tables.count("slices") && file_views.count("slices")) tables["slices"] = file_views.at("slices");
  for (const auto& [table, columns] : kRequired) {
    // Version 4 keeps shard_placements as spans behind a view of that name.
    const std::set<std::string>* have = nullptr;
    if (auto t = tables.find(table); t != tables.end()) have = &t->second;
    else if (auto v = file_views.find(table); v != file_views.end()) have = &v->second;
    if (!have) {
      r.problems.push_back(absl::StrCat("table `", table, "` is missing"));
      continue;
    }
    for (absl::string_view col : absl::StrSplit(columns, ' ')) {
      if (!have->count(std::string(col)))
        r.problems.push_back(absl::StrCat("column `", table, ".", col, "` is missing"));
    }
  }
  // Later additions: an older file lacks them until a writer opens it.
  {
    sqlite3* ref = nullptr;
    if (sqlite3_open_v2(":memory:", &ref, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) == SQLITE_OK &&
        internal::Exec(ref, SchemaSql()).ok()) {
      CheckReport scratch;
      Checker rc(ref, &scratch);
      const std::map<std::string, std::set<std::string>>& views = file_views;
      std::vector<std::string> later;
      for (bool view : {false, true}) {
        const auto& have = view ? views : tables;
        for (const auto& [name, columns] : rc.Columns(view)) {
          auto it = have.find(name);
          // A table that later versions made a view (slices, shard_placements)
          // is said by the tables that replaced it.
          if (it == have.end() && view && tables.count(name)) continue;
          if (it == have.end()) {
            // A table every version has is a problem above, not a later addition.
            if (!view && std::any_of(std::begin(kRequired), std::end(kRequired),
                                     [&](const auto& t) { return name == t.first; }))
              continue;
            later.push_back(absl::StrCat(view ? "view `" : "table `", name, "`"));
            continue;
          }
          for (const std::string& col : columns) {
            bool required = false;
            for (const auto& [t, cols] : kRequired) {
              if (name == t) {
                for (absl::string_view k : absl::StrSplit(cols, ' '))
                  if (k == col) required = true;
              }
            }
            if (!it->second.count(col) && !required) later.push_back(absl::StrCat("`", name, ".", col, "`"));
          }
        }
      }
      if (!later.empty()) {
        r.notes.push_back(absl::StrCat("written before ", absl::StrJoin(later, ", "),
                                       " existed; the reports do without, and a writer adds them when it next "
                                       "opens the file"));
      }
    }
    sqlite3_close(ref);
  }

  // Declared references (REFERENCES runs(run_id), ...).
  std::map<std::string, int64_t> dangling;
  c.Each("PRAGMA foreign_key_check", [&](sqlite3_stmt* s) { ++dangling[absl::StrCat(Text(s, 0), " -> ", Text(s, 2))]; });
  for (const auto& [edge, n] : dangling)
    r.problems.push_back(absl::StrCat(n, " rows of ", edge, " refer to rows that do not exist"));

  // Every row belongs to a run of the file.
  for (const auto& entry : tables) {
    const std::string& table = entry.first;
    if (table == "runs" || !entry.second.count("run_id")) continue;
    c.Each(absl::StrCat("SELECT count(*) FROM \"", table, "\" WHERE run_id NOT IN (SELECT run_id FROM runs)"),
           [&](sqlite3_stmt* s) {
             if (int64_t n = sqlite3_column_int64(s, 0); n > 0)
               r.problems.push_back(absl::StrCat(n, " rows of `", table, "` belong to no run in `runs`"));
           });
  }

  // Runs: their status values, and how each stands.
  if (!tables.count("runs")) return r;
  c.Each("SELECT run_id, status, schema_version, ended_at_ns IS NULL FROM runs", [&](sqlite3_stmt* s) {
    int64_t run = sqlite3_column_int64(s, 0);
    std::string status = Text(s, 1);
    if (status != "running" && status != "finished" && status != "incomplete" && status != "hang detected" &&
        status != "interrupted" && status != "failed")
      r.problems.push_back(absl::StrCat("run ", run, " has status '", status,
                                        "' (expected running, finished, incomplete, hang detected, interrupted or "
                                        "failed)"));
    int64_t v = sqlite3_column_int64(s, 2);
    if (v < 1 || v > kSchemaVersion)
      r.problems.push_back(absl::StrCat("run ", run, " says schema version ", v, " (this file is version ", version, ")"));
    if (status != "running" && sqlite3_column_int64(s, 3))
      r.problems.push_back(absl::StrCat("run ", run, " is ", status, " but has no end time"));
  });
  Reader reader = Reader::OnConnection(db.get());
  std::map<int64_t, RunState> states;
  if (auto all = ReadRunStates(reader); all.ok()) {
    std::map<int64_t, std::string> samples;
    c.Each("SELECT run_id, sample FROM runs", [&](sqlite3_stmt* s) { samples[sqlite3_column_int64(s, 0)] = Text(s, 1); });
    for (RunState& st : *all) {
      r.runs.push_back(absl::StrCat("run ", st.run_id, ": ", samples[st.run_id], ", ", st.Describe()));
      states[st.run_id] = std::move(st);
    }
  } else {
    r.problems.push_back(absl::StrCat("cannot read the runs' states: ", all.status().message()));
  }

  // Every chunk decodes (the reports would stop at a damaged one).
  if (chunked) {
    std::vector<TimelineSlice> decoded;
    int64_t damaged = 0;
    c.Each(absl::StrCat("SELECT ", internal::kChunkRowColumns, " FROM slice_chunks"), [&](sqlite3_stmt* s) {
      decoded.clear();
      if (absl::Status st = internal::DecodeChunkRow(s, &decoded); !st.ok()) {
        if (++damaged <= 5) r.problems.push_back(std::string(st.message()));
      }
    });
    if (damaged > 5) r.problems.push_back(absl::StrCat("and ", damaged - 5, " more damaged slice_chunks rows"));
  }
  // ... and every level-of-detail group (schema version 3).
  if (tables.count("slice_summary_groups")) {
    std::vector<SummaryBucket> decoded;
    int64_t damaged = 0;
    c.Each("SELECT run_id, track_id, level, depth, first_bucket, slice_base, step_base, count, buckets"
           " FROM slice_summary_groups",
           [&](sqlite3_stmt* s) {
             decoded.clear();
             absl::Status st = internal::DecodeGroup(
                 static_cast<int>(sqlite3_column_int64(s, 2)),
                 static_cast<int16_t>(std::clamp<int64_t>(sqlite3_column_int64(s, 3), 0, INT16_MAX)),
                 sqlite3_column_int64(s, 4), sqlite3_column_int64(s, 5), sqlite3_column_int64(s, 6),
                 sqlite3_column_int64(s, 7),
                 internal::ColumnView(s, 8),
                 &decoded);
             if (!st.ok() && ++damaged <= 5)
               r.problems.push_back(absl::StrCat("run ", sqlite3_column_int64(s, 0), ", track ",
                                                 sqlite3_column_int64(s, 1), ": ", st.message()));
           });
    if (damaged > 5)
      r.problems.push_back(absl::StrCat("and ", damaged - 5, " more damaged slice_summary_groups rows"));
  }

  // Every placement's index ranges parse (the Sharding view leaves out those
  // that do not), and each span's chips are the run's.
  // (A file a writer is migrating, or was killed migrating, still has the
  // shard_placements table, and its rows are the ones to read.)
  const bool spans = tables.count("shard_placement_spans") > 0 && !tables.count("shard_placements");
  if (spans || tables.count("shard_placements")) {
    int64_t damaged = 0;
    // ... and have their tensor's rank (a tensor's shape is "[64,784]").
    const bool shapes = tables.count("tensors") > 0;
    const std::string from =
        spans ? "shard_placement_spans p"
              : "(SELECT run_id, tensor_id, device_id AS first_device, device_id AS last_device, index_ranges, bytes"
                " FROM shard_placements) p";
    c.Each(absl::StrCat("SELECT p.run_id, p.tensor_id, p.first_device, p.last_device, p.index_ranges, ",
                        shapes ? "t.shape" : "NULL", ", r.num_devices, typeof(p.bytes) = 'integer' AND p.bytes >= 0,"
                        " p.bytes FROM ", from,
                        shapes ? " LEFT JOIN tensors t ON t.run_id = p.run_id AND t.tensor_id = p.tensor_id" : "",
                        " LEFT JOIN runs r ON r.run_id = p.run_id"),
           [&](sqlite3_stmt* s) {
             const auto text = [&](int col) {
               const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(s, col));
               return t ? std::string_view(t, sqlite3_column_bytes(s, col)) : std::string_view();
             };
             const int64_t first = sqlite3_column_int64(s, 2), last = sqlite3_column_int64(s, 3);
             const bool chips_known = sqlite3_column_type(s, 6) != SQLITE_NULL;
             const int64_t chips = sqlite3_column_int64(s, 6);
             std::string problem;
             auto ranges = ParseIndexRanges(text(4));
             if (last < first) {
               problem = absl::StrCat("shard_placement_spans.last_device ", last, " is before first_device ", first);
             } else if (first < 0 || (chips_known && last >= chips)) {
               problem = absl::StrCat("chips ", first, "-", last, " are not all the run's (it has ",
                                      chips_known ? absl::StrCat(chips) : "an unknown number of", " chips)");
             } else if (!ranges.ok()) {
               problem = std::string(ranges.status().message());
             } else if (!sqlite3_column_int(s, 7)) {
               problem = absl::StrCat("shard_placements.bytes '", std::string(text(8)).substr(0, 40),
                                      "' is not a count of bytes");
             } else if (const int rank = ShapeRank(text(5));
                        rank >= 0 && static_cast<size_t>(rank) != ranges->size()) {
               problem = absl::StrCat("shard_placements.index_ranges '", std::string(text(4)), "' has ",
                                      ranges->size(), " dimensions where the tensor's shape ",
                                      std::string(text(5)), " has ", rank);
             }
             const std::string on = first == last ? absl::StrCat("chip ", first) : absl::StrCat("chips ", first, "-", last);
             if (!problem.empty() && ++damaged <= 5)
               r.problems.push_back(absl::StrCat("run ", sqlite3_column_int64(s, 0), ", tensor_id ",
                                                 sqlite3_column_int64(s, 1), ", ", on, ": ", problem));
           });
    if (damaged > 5)
      r.problems.push_back(absl::StrCat("and ", damaged - 5, " more damaged shard_placements rows"));
  }

  // References between tables. A run that did not finish may end mid-way
  // (its last records never came): there a missing row is a note, not damage.
  for (const Reference& ref : kReferences) {
    if (!tables.count(ref.table) || !tables.count(ref.target)) continue;
    if (chunked && std::string_view(ref.table) == "slices" && std::string_view(ref.target) == "tracks") {
      // The same question of the chunks, without expanding every slice.
      c.Each("SELECT s.run_id, sum(s.count) FROM slice_chunks s WHERE NOT EXISTS (SELECT 1 FROM tracks t"
             " WHERE t.run_id = s.run_id AND t.track_id = s.track_id) GROUP BY s.run_id",
             [&](sqlite3_stmt* s) {
               int64_t run = sqlite3_column_int64(s, 0), n = sqlite3_column_int64(s, 1);
               auto it = states.find(run);
               bool finished = it == states.end() || it->second.status == "finished" ||
                      it->second.status == "hang detected" ||
                      it->second.status == "failed";  // ended on purpose, every record written
               std::string line = absl::StrCat("run ", run, ": ", n, " ", ref.what);
               if (finished) r.problems.push_back(line);
               else r.notes.push_back(absl::StrCat(line, " (the run is ", it->second.status,
                                                   ": its last records may not have reached the file)"));
             });
      continue;
    }
    c.Each(ref.sql, [&](sqlite3_stmt* s) {
      int64_t run = sqlite3_column_int64(s, 0), n = sqlite3_column_int64(s, 1);
      auto it = states.find(run);
      bool finished = it == states.end() || it->second.status == "finished" ||
                      it->second.status == "hang detected" ||
                      it->second.status == "failed";  // ended on purpose, every record written
      std::string line = absl::StrCat("run ", run, ": ", n, " ", ref.what);
      if (finished) {
        r.problems.push_back(line);
      } else {
        r.notes.push_back(absl::StrCat(line, " (the run is ", it->second.status,
                                       ": its last records may not have reached the file)"));
      }
    });
  }
  return r;
}

}  // namespace shardscope::store
