// Small SQLite helpers shared by the writer and the reader (internal to store/):
// a prepared-statement wrapper and the check that a file is a shardscope
// database, so both sides reject foreign files with the same words.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace shardscope::store::internal {

// The connection's last error, e.g. "UNIQUE constraint failed: runs.run_id".
std::string DbError(sqlite3* db);

// Owns one prepared statement. Binding helpers take 1-based indexes, as SQLite does.
class Stmt {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt(Stmt&& o) noexcept : db_(o.db_), s_(o.s_) { o.s_ = nullptr; }
  Stmt& operator=(Stmt&& o) noexcept;
  ~Stmt();

  absl::Status Prepare(sqlite3* db, std::string_view sql);
  sqlite3_stmt* get() const { return s_; }

  void Int(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void Real(int i, double v) { sqlite3_bind_double(s_, i, v); }
  void Text(int i, std::string_view v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void Null(int i) { sqlite3_bind_null(s_, i); }
  // Producers use -1 for "none" (and "" for absent text); the store keeps SQL NULL.
  void IntOrNull(int i, int64_t v) { v < 0 ? Null(i) : Int(i, v); }
  void TextOrNull(int i, std::string_view v) { v.empty() ? Null(i) : Text(i, v); }

  // Steps a statement that returns no rows, then resets it for reuse.
  absl::Status Run();

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* s_ = nullptr;
};

// Runs one or more statements that return nothing (schema text, pragmas).
absl::Status Exec(sqlite3* db, const std::string& sql);

// Checks that `db` (opened from `path`) is a shardscope database this build can
// read, and returns its schema version through `version`. With `allow_empty`, an
// SQLite file with no tables at all passes with version 0 (a fresh file to set up).
absl::Status CheckShardscopeDb(sqlite3* db, const std::string& path, bool allow_empty,
                               int* version);

}  // namespace shardscope::store::internal
