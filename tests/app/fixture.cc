// Fixture databases for the app's tests; see fixture.h.
#include "tests/app/fixture.h"

#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "store/schema.h"
#include "store/writer.h"

namespace shardscope::app::testing {
namespace {

class Db {
 public:
  explicit Db(sqlite3* db) : db_(db) {}
  ~Db() { sqlite3_close(db_); }
  absl::Status Exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string message = err ? err : "unknown error";
      sqlite3_free(err);
      return absl::InternalError(absl::StrCat("fixture SQL failed: ", message, "\n", sql.substr(0, 300)));
    }
    return absl::OkStatus();
  }

 private:
  sqlite3* db_;
};

#define RETURN_IF_ERROR_FIXTURE(expr) \
  if (absl::Status st = (expr); !st.ok()) return st

int64_t NameId(const std::string& name) {
  if (name == "fusion.3") return 1;
  if (name == "dot.7") return 2;
  if (name == "all-reduce.2") return 3;
  if (name == "mark_step") return 4;
  if (name == "trace") return 5;
  return 6;  // tiny
}

std::string SliceRow(int64_t run, int64_t& id, int64_t track, int64_t start, int64_t dur,
                     int depth, const char* name, const char* kind, int step) {
  const bool collective = std::string(kind) == "collective";
  return absl::StrFormat("(%d,%d,%d,%d,%d,%d,NULL,%d,'%s',%d,1,%s,NULL,%d)", run, id++, track, start, dur, depth,
                         NameId(name), kind, step, collective ? "9" : "NULL", collective ? 4096 : 0);
}

absl::Status WriteRun(Db& db, const FixtureRun& r) {
  RETURN_IF_ERROR_FIXTURE(db.Exec(absl::StrFormat(
      "INSERT INTO runs (run_id, sample, mesh, mesh_axes, sharding, config_json, topology, profile, "
      "clock_kinds, tool_version, schema_version, simulated, num_hosts, num_devices, started_at, "
      "started_at_ns, ended_at_ns, status) VALUES (%d, 'mlp', '%dx1', 'data', 'data', '{}', "
      "'%d hosts', 'cpu', 'host,device', 'test', 1, 0, %d, %d, '2024-01-01T00:00:00Z', 0, 1, "
      "'finished');",
      r.run_id, r.num_devices, r.num_hosts, r.num_hosts, r.num_devices)));
  std::string sql;
  for (int h = 0; h < r.num_hosts; ++h) {
    absl::StrAppend(&sql, absl::StrFormat("INSERT INTO hosts VALUES (%d, %d, 'host%d');", r.run_id,
                                          h, h));
    absl::StrAppend(&sql, absl::StrFormat(
                              "INSERT INTO tracks VALUES (%d, %d, 'host %d main', 'host', NULL, "
                              "%d, 'main');",
                              r.run_id, 1000 + h, h, h));
  }
  for (int d = 0; d < r.num_devices; ++d) {
    int host = d * r.num_hosts / r.num_devices;
    absl::StrAppend(&sql, absl::StrFormat(
                              "INSERT INTO devices VALUES (%d, %d, %d, '[%d]', 1073741824, 1e12);",
                              r.run_id, d, host, d));
    absl::StrAppend(&sql, absl::StrFormat(
                              "INSERT INTO tracks VALUES (%d, %d, 'chip %d', 'device', %d, %d, "
                              "NULL);",
                              r.run_id, d + 1, d, d, host));
  }
  RETURN_IF_ERROR_FIXTURE(db.Exec(sql));

  std::vector<std::string> rows;
  int64_t id = 1;
  for (int s = 0; s < r.steps; ++s) {
    const int64_t t = s * kStepNs;
    for (int d = 0; d < r.num_devices; ++d) {
      const int64_t skew = d * 5'000;
      rows.push_back(SliceRow(r.run_id, id, d + 1, t + skew, 300'000, 0, "fusion.3", "compute", s));
      rows.push_back(SliceRow(r.run_id, id, d + 1, t + skew + 310'000, 250'000, 0, "dot.7",
                              "compute", s));
      rows.push_back(SliceRow(r.run_id, id, d + 1, t + 600'000, 200'000 + d * 10'000, 0,
                              "all-reduce.2", "collective", s));
    }
    for (int h = 0; h < r.num_hosts; ++h) {
      const int64_t ht = kHostClockStart + t;
      rows.push_back(SliceRow(r.run_id, id, 1000 + h, ht, 400'000, 0, "mark_step", "host", s));
      rows.push_back(SliceRow(r.run_id, id, 1000 + h, ht + 20'000, 150'000, 1, "trace", "host", s));
    }
  }
  const int64_t tiny_start = r.steps * kStepNs;
  for (int i = 0; i < r.tiny_slices; ++i) {
    rows.push_back(SliceRow(r.run_id, id, 1, tiny_start + 2 * i, 1, 0, "tiny", "compute", -1));
  }
  // Batched inserts: SQLite's statement length limit is 1 GB, but smaller
  // statements keep a failure's message short.
  for (size_t i = 0; i < rows.size(); i += 500) {
    std::string insert = "INSERT INTO slices VALUES ";
    for (size_t j = i; j < std::min(rows.size(), i + 500); ++j) {
      if (j > i) insert += ",";
      insert += rows[j];
    }
    RETURN_IF_ERROR_FIXTURE(db.Exec(insert + ";"));
  }

  if (r.with_compilations) {
    RETURN_IF_ERROR_FIXTURE(db.Exec(absl::StrFormat(
        "INSERT INTO compilations(run_id, compile_id, step, graph_id, cache, cause_kind, cause_detail,"
        " source_file, source_line, duration_ns, prev_graph_id, call_site, host_start_ns) VALUES "
        "(%1$d, 1, 0, 1, 'miss', 'first_compile', 'first graph at this call site', "
        "'samples/mlp.cc', 52, 250000, NULL, 'samples/mlp.cc:52 mark_step', %2$d),"
        "(%1$d, 2, 2, 2, 'miss', 'input_shape_changed', 'x f32[64,784] -> f32[48,784]', "
        "'samples/mlp.cc', 41, 180000, 1, 'samples/mlp.cc:52 mark_step', %3$d),"
        "(%1$d, 3, 3, 1, 'memory_hit', NULL, NULL, NULL, NULL, 12000, NULL, "
        "'samples/mlp.cc:52 mark_step', %4$d);",
        r.run_id, kHostClockStart + 180'000, kHostClockStart + 2 * kStepNs + 180'000,
        kHostClockStart + 3 * kStepNs + 180'000)));
  }

  // Placement: x [8,4] split in four over the batch (chips 0-3 each a row
  // block), w [4,6] split in two over its rows and replicated over the rest
  // (chips 0,2 hold rows 0:2, chips 1,3 rows 2:4), and one rematerialization.
  if (r.num_devices == 4) {
    std::string sql = absl::StrFormat(
        "INSERT INTO tensors VALUES (%1$d, 1, 'x', '[8,4]', 'f32', '{devices=[4,1]0,1,2,3}', 'annotated', "
        "'samples/mlp.cc', 41, 0),"
        "(%1$d, 2, 'w', '[4,6]', 'f32', '{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}', 'propagated', "
        "'samples/mlp.cc', 30, 0);",
        r.run_id);
    for (int d = 0; d < 4; ++d) {
      absl::StrAppend(&sql, absl::StrFormat("INSERT INTO shard_placements VALUES (%d, 1, 'x', %d, '[%d:%d,0:4]', 32);",
                                            r.run_id, d, 2 * d, 2 * d + 2));
      const int half = d % 2;
      absl::StrAppend(&sql, absl::StrFormat("INSERT INTO shard_placements VALUES (%d, 2, 'w', %d, '[%d:%d,0:6]', 48);",
                                            r.run_id, d, 2 * half, 2 * half + 2));
    }
    absl::StrAppend(&sql, absl::StrFormat("INSERT INTO rematerializations VALUES (%d, 1, 0, 17, 'reshape.17', "
                                          "'stablehlo.dot_general', 4096, 'samples/mlp.cc', 44);",
                                          r.run_id));
    // The all-reduce (op 9 of graph 1) adds up w's gradient (global op 2).
    absl::StrAppend(&sql, absl::StrFormat(
                              "INSERT INTO ops (run_id, graph_id, op_id, name, opcode, shape, flops, bytes_read, "
                              "bytes_written, modeled_ns, roofline, profile, moves_op_id) VALUES (%1$d, 1, 9, "
                              "'all-reduce.2', 'stablehlo.all_reduce', 'f32[2,6]', 0, 48, 48, 1000, 'collective', "
                              "'cpu', 2);"
                              "INSERT INTO sharding_decisions (run_id, graph_id, op_id, name, sharding, source) "
                              "VALUES (%1$d, 1, 2, 'w', '{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}', "
                              "'annotated');",
                              r.run_id));
    RETURN_IF_ERROR_FIXTURE(db.Exec(sql));
  }
  return absl::OkStatus();
}

}  // namespace

// Opening the file with a writer migrates it to the current schema.
absl::Status MigrateToCurrent(const std::string& path) {
  auto w = store::Writer::Open(path);
  return w.ok() ? absl::OkStatus() : w.status();
}

absl::Status WriteFixtureDb(const std::string& path, const std::vector<FixtureRun>& runs) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
  sqlite3* raw = nullptr;
  if (sqlite3_open(path.c_str(), &raw) != SQLITE_OK) {
    std::string message = raw ? sqlite3_errmsg(raw) : "out of memory";
    sqlite3_close(raw);
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", message));
  }
  Db db(raw);
  // Rows are written the way version 1 stored them (one per slice); a
  // writer opening the file then migrates it to the current layout.
  std::ifstream v1(SHARDSCOPE_TEST_DATA "/store/schema_v1.sql");
  std::stringstream v1_sql;
  v1_sql << v1.rdbuf();
  if (v1_sql.str().empty()) return absl::NotFoundError("missing " SHARDSCOPE_TEST_DATA "/store/schema_v1.sql");
  RETURN_IF_ERROR_FIXTURE(db.Exec(v1_sql.str()));
  RETURN_IF_ERROR_FIXTURE(db.Exec(
      "INSERT OR REPLACE INTO meta VALUES ('tool', 'shardscope'), ('schema_version', '1');"));
  RETURN_IF_ERROR_FIXTURE(db.Exec(
      "BEGIN; INSERT INTO names VALUES (1, 'fusion.3'), (2, 'dot.7'), (3, 'all-reduce.2'), "
      "(4, 'mark_step'), (5, 'trace'), (6, 'tiny');"));
  for (const FixtureRun& run : runs) RETURN_IF_ERROR_FIXTURE(WriteRun(db, run));
  RETURN_IF_ERROR_FIXTURE(db.Exec("COMMIT;"));
  return MigrateToCurrent(path);
}

std::string TempPath(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string prefix = info ? absl::StrCat(info->test_suite_name(), ".", info->name()) : "app";
  for (char& c : prefix) {
    if (c == '/') c = '_';
  }
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "shardscope_app_tests";
  std::filesystem::create_directories(dir);
  return (dir / absl::StrCat(prefix, ".", name)).string();
}

}  // namespace shardscope::app::testing
