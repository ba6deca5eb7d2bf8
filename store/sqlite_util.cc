// SQLite helpers for store/ (see sqlite_util.h).
#include "store/sqlite_util.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "store/schema.h"

namespace shardscope::store::internal {

std::string DbError(sqlite3* db) {
  return db ? sqlite3_errmsg(db) : "out of memory";
}

Stmt& Stmt::operator=(Stmt&& o) noexcept {
  if (this != &o) {
    sqlite3_finalize(s_);
    db_ = o.db_;
    s_ = o.s_;
    o.s_ = nullptr;
  }
  return *this;
}

Stmt::~Stmt() { sqlite3_finalize(s_); }

absl::Status Stmt::Prepare(sqlite3* db, std::string_view sql) {
  db_ = db;
  sqlite3_finalize(s_);
  s_ = nullptr;
  if (sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &s_, nullptr) !=
      SQLITE_OK) {
    return absl::InternalError(absl::StrCat("preparing \"", std::string(sql), "\": ", DbError(db)));
  }
  return absl::OkStatus();
}

absl::Status Stmt::Run() {
  int rc = sqlite3_step(s_);
  absl::Status st;
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) st = absl::InternalError(DbError(db_));
  sqlite3_reset(s_);
  sqlite3_clear_bindings(s_);
  return st;
}

absl::Status Exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : DbError(db);
    sqlite3_free(err);
    return absl::InternalError(msg);
  }
  return absl::OkStatus();
}

namespace {
// Reads meta[key] into *out; false when the key is absent.
bool MetaValue(sqlite3* db, const char* key, std::string* out) {
  Stmt s;
  if (!s.Prepare(db, "SELECT value FROM meta WHERE key = ?1").ok()) return false;
  s.Text(1, key);
  if (sqlite3_step(s.get()) != SQLITE_ROW) return false;
  const unsigned char* v = sqlite3_column_text(s.get(), 0);
  *out = v ? reinterpret_cast<const char*>(v) : "";
  return true;
}
}  // namespace

absl::Status CheckShardscopeDb(sqlite3* db, const std::string& path, bool allow_empty,
                               int* version) {
  *version = 0;
  // The first real read is where SQLite notices a file that is not a database.
  Stmt count;
  absl::Status st = count.Prepare(
      db, "SELECT count(*), sum(type = 'table' AND name = 'meta') FROM sqlite_master");
  int rc = st.ok() ? sqlite3_step(count.get()) : SQLITE_ERROR;
  if (rc != SQLITE_ROW) {
    int code = sqlite3_errcode(db);
    if (code == SQLITE_NOTADB) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " is not an SQLite database (", DbError(db), ")"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", path, ": ", DbError(db)));
  }
  int64_t objects = sqlite3_column_int64(count.get(), 0);
  bool has_meta = sqlite3_column_int64(count.get(), 1) > 0;
  if (objects == 0 && allow_empty) return absl::OkStatus();
  if (!has_meta) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        " is not a shardscope database (no 'meta' table); was it written by another tool?"));
  }
  std::string tool, ver;
  if (!MetaValue(db, "tool", &tool) || tool != "shardscope") {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is not a shardscope database (its meta table names tool '", tool,
        "'); was it written by another tool?"));
  }
  int v = 0;
  if (!MetaValue(db, "schema_version", &ver) || !absl::SimpleAtoi(ver, &v) || v < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " has no valid schema_version in its meta table ('", ver,
        "'); the file may be damaged"));
  }
  if (v > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " uses store schema version ", v, ", newer than this build of shardscope reads (",
        kSchemaVersion, "); use a newer shardscope"));
  }
  *version = v;
  return absl::OkStatus();
}

}  // namespace shardscope::store::internal
