// Helpers of the end-to-end tests: run a command and capture its output, a
// fresh database path in the test's temporary directory, and a query.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "store/reader.h"
#include "tests/temp_files.h"

namespace shardscope::e2e {

struct Output {
  int code = -1;
  std::string text;  // stdout and stderr together
};

inline Output Shell(const std::string& cmd) {
  Output o;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return o;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.text.append(buf, n);
  int status = pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

// A path that holds no database yet (nor its WAL files).
inline std::string TempDb(const std::string& name) {
  std::string path = absl::StrCat(::testing::TempDir(), "/", name, "_", getpid(), ".db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  return test_files::RemoveAtExit(path);
}

// Runs `sql` on the database at `db`; a failure fails the test and gives no rows.
inline store::QueryResult Q(const std::string& db, const std::string& sql) {
  auto r = store::Reader::Open(db);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  auto q = r->Query(sql);
  EXPECT_TRUE(q.ok()) << q.status() << "\n" << sql;
  return q.ok() ? *q : store::QueryResult{};
}

// Writes `sql` into the database at `db` (damage for a test to read back).
inline void Exec(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK) << db;
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "") << "\n" << sql;
  sqlite3_free(err);
  sqlite3_close(h);
}

// A report meant to be read offline: one HTML file that fetches nothing
// (no scripts, no remote sources, styles or imports) and stays under 2 MB.
inline void ExpectSelfContainedHtml(const std::string& html) {
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u) << html.substr(0, 200);
  for (const char* remote : {"<script", "src=\"http", "href=\"http", "@import", "url(http"})
    EXPECT_EQ(html.find(remote), std::string::npos) << remote;
  EXPECT_LT(html.size(), 2u << 20);
}

}  // namespace shardscope::e2e
