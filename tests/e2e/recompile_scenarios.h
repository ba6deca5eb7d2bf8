// The fixture of the recompilation scenario suite (recompile_scenarios_*_test.cc):
// each scenario is a short training loop written as a user writes one, run on
// 1-4 virtual chips and recorded into its own SQLite database exactly as
// `shardscope run` records a sample (ui/cli/drivers.cc): a Writer as the
// recorder, the run row, Init, the device and mesh rows, the loop, Shutdown,
// EndRun. The misses are then read back with sqlite3 and compared with what
// the diagnosis must say: kind, subkind, the user's file and line, and words
// of the detail.
//
// Lines are never written down: a scenario captures __LINE__ on the line the
// cause must point at (`Tensor x = Tensor::from_host(...); at_x = __LINE__;`).
#pragma once

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/temp_files.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/shardscope.h"
#include "profiler/trace/recorder.h"
#include "store/writer.h"

namespace shardscope::scen {

// The repo-relative path the library records for a file of this directory.
inline std::string RepoPath(const char* file) {
  std::string f = file;
  size_t at = f.rfind("tests/e2e/");
  return at == std::string::npos ? f : f.substr(at);
}

// A recorded path with any leading "./" or "../" dropped. A build whose
// compiler sees relative source paths (ccache with CCACHE_BASEDIR) makes
// __FILE__, and so the recorded file, "../tests/e2e/x.cc"; the scenarios
// compare files this way, so that they judge the line (the user's file, not
// the library's), and SourceFilesAreRepoRelative checks the exact spelling once.
inline std::string Normalized(std::string f) {
  while (true) {
    if (f.rfind("./", 0) == 0) f = f.substr(2);
    else if (f.rfind("../", 0) == 0) f = f.substr(3);
    else return f;
  }
}

inline absl::Status StatusOf(const absl::Status& s) { return s; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

// A step of the user's program that must succeed (a Status or StatusOr). The
// call it wraps keeps the line it is written on.
#define SS_OK(expr)                                                   \
  do {                                                                \
    const absl::Status ss_status_ = ::shardscope::scen::StatusOf(expr); \
    ASSERT_TRUE(ss_status_.ok()) << ss_status_;                       \
  } while (0)

// ---------------------------------------------------------------- data a loader would hand out

inline Literal Rand(std::vector<int64_t> dims, uint64_t seed, DType dtype = DType::kF32) {
  Literal l(Shape(dtype, std::move(dims)));
  std::mt19937_64 rng(seed * 7919 + 17);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t k = 0; k < l.elements(); ++k) l.SetDouble(k, u(rng));
  return l;
}

// Integer ids in [0, classes): class labels or tokens.
inline Literal Ids(std::vector<int64_t> dims, int64_t classes, uint64_t seed, DType dtype = DType::kI32) {
  Literal l(Shape(dtype, std::move(dims)));
  std::mt19937_64 rng(seed * 104729 + 3);
  std::uniform_int_distribution<int64_t> u(0, classes - 1);
  for (int64_t k = 0; k < l.elements(); ++k) l.SetDouble(k, static_cast<double>(u(rng)));
  return l;
}

// A 0/1 mask of `n` entries with `valid` ones, spread out.
inline Literal Mask(int64_t n, int64_t valid) {
  std::vector<float> m(n, 0.f);
  for (int64_t k = 0; k < valid; ++k) m[k * n / valid] = 1.f;
  return Literal::FromF32({n}, m);
}

inline Mesh MakeMesh(std::vector<int64_t> ids, std::vector<int64_t> shape, std::vector<std::string> names) {
  auto m = Mesh::Create(std::move(ids), std::move(shape), std::move(names));
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

// ---------------------------------------------------------------- recording a run

struct Miss {
  int step = 0;
  std::string kind;
  std::optional<std::string> subkind;  // NULL: nullopt
  std::string detail, file;
  int line = 0;
};

struct Recorded {
  std::string db;
  std::vector<Miss> misses;
  int64_t compilations = 0;  // every request: misses and hits
  bool has_subkind_column = false;
  bool ok = false;           // recorded and read back

  std::string Dump() const {
    std::string s = absl::StrCat("  ", misses.size(), " misses of ", compilations, " compilations:\n");
    for (const Miss& m : misses)
      absl::StrAppend(&s, "    step ", m.step, "  ", m.kind, " / ", m.subkind.value_or("NULL"), "  ", m.file, ":",
                      m.line, "  \"", m.detail, "\"\n");
    return s;
  }
};

inline std::string TempPath(const std::string& name, const std::string& ext) {
  return test_files::RemoveAtExit(absl::StrCat(::testing::TempDir(), "/scen_", name, "_", getpid(), ext));
}

// Reads the misses of the run in `db` back with sqlite3.
inline void ReadBack(Recorded& r) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(r.db.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open " << r.db << ": " << (db ? sqlite3_errmsg(db) : "?");
    sqlite3_close(db);
    return;
  }
  auto prepare = [&](const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
      return static_cast<sqlite3_stmt*>(nullptr);
    }
    return st;
  };
  auto text = [](sqlite3_stmt* st, int col) {
    const unsigned char* t = sqlite3_column_text(st, col);
    return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
  };
  if (sqlite3_stmt* st = prepare("SELECT name FROM pragma_table_info('compilations')")) {
    while (sqlite3_step(st) == SQLITE_ROW) r.has_subkind_column |= text(st, 0) == "cause_subkind";
    sqlite3_finalize(st);
  }
  // Without the column (a store from before it), every subkind reads as NULL;
  // SubkindColumn fails once for that instead of every scenario.
  const std::string subkind = r.has_subkind_column ? "cause_subkind" : "NULL AS cause_subkind";
  const std::string sql = absl::StrCat("SELECT step, cache, cause_kind, ", subkind,
                                       ", cause_detail, source_file, source_line FROM compilations"
                                       " WHERE cache='miss' ORDER BY step, compile_id");
  if (sqlite3_stmt* st = prepare(sql)) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      Miss m;
      m.step = sqlite3_column_int(st, 0);
      m.kind = text(st, 2);
      if (sqlite3_column_type(st, 3) != SQLITE_NULL) m.subkind = text(st, 3);
      m.detail = text(st, 4);
      m.file = text(st, 5);
      m.line = sqlite3_column_int(st, 6);
      r.misses.push_back(std::move(m));
    }
    sqlite3_finalize(st);
  }
  if (sqlite3_stmt* st = prepare("SELECT COUNT(*) FROM compilations")) {
    if (sqlite3_step(st) == SQLITE_ROW) r.compilations = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  r.ok = true;
}

// Records `body` (the user's program) as one run into a fresh database, as
// `shardscope run` does, and reads its misses back.
inline Recorded Record(const std::string& name, const InitOptions& opts, const std::function<void()>& body) {
  Recorded r;
  r.db = TempPath(name, ".db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((r.db + suffix).c_str());
  {
    auto writer = store::Writer::Open(r.db);
    if (!writer.ok()) {
      ADD_FAILURE() << writer.status();
      return r;
    }
    trace::ResetHostClock();
    trace::SetRecorder(writer->get());
    const int chips = opts.num_hosts * opts.chips_per_host;
    trace::RunRecord run;
    run.sample = name;
    run.mesh = absl::StrCat(chips, "x1");
    run.mesh_axes = "data,model";
    run.sharding = "dp";
    run.config_json = absl::StrCat("{\"scenario\": \"", name, "\", \"chips\": ", chips, "}");
    run.topology = absl::StrCat(opts.num_hosts, opts.num_hosts == 1 ? " host x " : " hosts x ", opts.chips_per_host,
                                " chips");
    run.tool_version = SHARDSCOPE_VERSION;
    run.started_at_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
    run.num_hosts = opts.num_hosts;
    run.num_devices = chips;
    run.clock_kinds = "host,device,modeled";
    auto run_id = (*writer)->StartRun(run);
    if (!run_id.ok()) {
      trace::SetRecorder(nullptr);
      ADD_FAILURE() << run_id.status();
      return r;
    }
    if (absl::Status s = Init(opts); !s.ok()) {
      trace::SetRecorder(nullptr);
      ADD_FAILURE() << s;
      return r;
    }
    for (int d = 0; d < chips; ++d) {
      trace::DeviceRecord dr;
      dr.device_id = d;
      dr.host_id = d / opts.chips_per_host;
      dr.coords = absl::StrCat("[", d, ",0]");
      dr.hbm_bytes = GetClient().topology().device(d).hbm_bytes();
      dr.peak_flops = GetClient().profile().peak_flops;
      trace::recorder().Record(dr);
    }
    std::string ids;
    for (int d = 0; d < chips; ++d) absl::StrAppend(&ids, d ? "," : "", d);
    trace::recorder().Record(trace::MeshRecord{0, absl::StrCat("[", chips, ",1]"), run.mesh_axes, ids});

    body();

    Shutdown();
    (*writer)->EndRun();
    EXPECT_TRUE((*writer)->status().ok()) << (*writer)->status();
    trace::SetRecorder(nullptr);
  }
  ReadBack(r);
  return r;
}

inline Recorded Record(const std::string& name, int chips, const std::function<void()>& body) {
  InitOptions opts;
  opts.chips_per_host = chips;
  return Record(name, opts, body);
}

// ---------------------------------------------------------------- what the diagnosis must say

inline constexpr const char* kAny = "*";  // a kind the scenario does not pin

struct Want {
  int step = 0;
  std::string kind;
  std::string subkind;  // "" : NULL (every kind but graph_changed)
  int line = 0;
  std::vector<std::string> detail = {};  // words the detail holds (case-insensitive)
};

inline bool ContainsNoCase(const std::string& hay, const std::string& needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                        [](char a, char b) { return std::tolower(a) == std::tolower(b); });
  return it != hay.end();
}

// Details are short: about 200 characters at most.
inline constexpr size_t kMaxDetail = 240;

// The run's misses are exactly `want`, in order of step: each with its kind,
// subkind, this file's line and the words of its detail.
inline void ExpectMisses(const Recorded& r, const std::string& file, const std::vector<Want>& want) {
  ASSERT_TRUE(r.ok) << "the run was not recorded";
  std::string problems;
  if (r.misses.size() != want.size())
    absl::StrAppend(&problems, "  expected ", want.size(), " misses, observed ", r.misses.size(), "\n");
  for (size_t k = 0; k < want.size() && k < r.misses.size(); ++k) {
    const Want& w = want[k];
    const Miss& m = r.misses[k];
    std::vector<std::string> wrong;
    if (m.step != w.step) wrong.push_back(absl::StrCat("step ", m.step, " (expected ", w.step, ")"));
    if (w.kind != kAny) {
      if (m.kind != w.kind) wrong.push_back("kind");
      const std::optional<std::string> sub = w.subkind.empty() ? std::nullopt : std::optional(w.subkind);
      if (m.subkind != sub) wrong.push_back("subkind");
    }
    if (Normalized(m.file) != file) wrong.push_back("file");
    if (w.line && m.line != w.line) wrong.push_back("line");
    for (const std::string& d : w.detail)
      if (!ContainsNoCase(m.detail, d)) wrong.push_back(absl::StrCat("detail lacks '", d, "'"));
    if (m.detail.size() > kMaxDetail) wrong.push_back(absl::StrCat("detail has ", m.detail.size(), " characters"));
    if (m.detail.empty()) wrong.push_back("no detail");
    if (wrong.empty()) continue;
    std::string words;
    for (const auto& d : w.detail) absl::StrAppend(&words, words.empty() ? "" : ", ", "'", d, "'");
    absl::StrAppend(&problems, "  miss #", k, ": ", absl::StrJoin(wrong, ", "), "\n    expected step ", w.step, "  ",
                    w.kind, " / ", w.kind == kAny ? "*" : (w.subkind.empty() ? "NULL" : w.subkind), "  ", file,
                    ":", w.line ? absl::StrCat(w.line) : "*", "  detail has [", words, "]\n    observed step ",
                    m.step, "  ", m.kind, " / ", m.subkind.value_or("NULL"), "  ", m.file, ":", m.line, "  \"",
                    m.detail, "\"\n");
  }
  if (!problems.empty()) ADD_FAILURE() << "misses differ from the contract:\n" << problems << "observed:\n" << r.Dump();
}

// Only the number of misses (and that none comes after `last_step`).
inline void ExpectMissCount(const Recorded& r, size_t n, int last_step) {
  ASSERT_TRUE(r.ok) << "the run was not recorded";
  bool late = false;
  for (const Miss& m : r.misses) late |= m.step > last_step;
  if (r.misses.size() != n || late)
    ADD_FAILURE() << "expected exactly " << n << " misses, none after step " << last_step << "; observed:\n"
                  << r.Dump();
}

}  // namespace shardscope::scen
