// Small SQLite helpers shared by the writer and the reader (internal to store/):
// a prepared-statement wrapper and the check that a file is a shardscope
// database, so both sides reject foreign files with the same words.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <set>
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

// A text column of the current row as a view ("" for NULL), valid until the
// statement steps again.
std::string_view ColumnView(sqlite3_stmt* s, int col);

// Runs one or more statements that return nothing (schema text, pragmas).
absl::Status Exec(sqlite3* db, const std::string& sql);

// An SQLite result code as a status, so callers can tell kinds of failure apart:
// busy/locked -> Unavailable (worth retrying), full -> ResourceExhausted,
// corrupt/not a database -> DataLoss, read-only/permission/cannot open ->
// PermissionDenied, I/O and memory -> Internal, anything else (a constraint,
// a type mismatch: one bad row) -> InvalidArgument.
absl::Status SqliteStatus(int rc, std::string message);
// True for a status that aborts a whole transaction (anything but one bad row).
bool AbortsTransaction(const absl::Status& st);

// Refuses what is not a regular file (a directory, FIFO, device, socket)
// without opening it: opening a FIFO blocks until someone writes to it.
// A missing path passes when `may_be_missing` (the writer creates it).
absl::Status CheckRegularFile(const std::string& path, bool may_be_missing);

// What the file's first 100 bytes (SQLite's header) say against its size
// and its side files, before SQLite reads it:
// - a -wal with frames beside a file in rollback-journal mode (a finished
//   shardscope file) is another database's: a run killed while writing a
//   file of that name left it, and the file was copied over since. SQLite
//   would read the stranger's pages as this file's, and a writer would make
//   that permanent: FailedPrecondition.
// - a file shorter than the pages its header counts was cut short (a copy or
//   a download that stopped): DataLoss, saying how much is missing.
// Files that are not SQLite (too short, another magic) pass: the open says.
absl::Status CheckFileHeader(const std::string& path);

// `path` with its directory resolved (symbolic links followed, as SQLite's
// unix VFS opens files), for a file that may not exist yet; `path` itself
// when the directory cannot be resolved.
std::string FullPath(const std::string& path);

// Whether the -wal beside a file in WAL mode is this file's. A writer that
// makes a file writes a random id into its header (user_version, bytes 60-63
// of page 1) while the file is still in rollback mode, so the main file holds
// it from the start; page 1 goes into the -wal with the file's growth, id and
// all. Read through the -wal (`db`, open on `path`) and from the main file
// alone (immutable), the two ids differ only when the -wal is another
// database's (a killed run's file with another file's -wal copied beside it:
// SQLite would read the stranger's pages, and a writer would checkpoint them
// in): FailedPrecondition then. OK when the main file has no id (made before
// it) or the -wal is empty.
absl::Status CheckWalBelongs(const std::string& path, sqlite3* db);

// "X is damaged (...); run `shardscope check X` for details": for
// SQLITE_CORRUPT and SQLITE_NOTADB met while reading a file that opened.
absl::Status DamagedFileError(const std::string& path, const std::string& detail);

// Names of every table, index and view the current schema text creates
// (computed once, from SchemaSql() on an in-memory database).
const std::set<std::string>& SchemaObjectNames();

// How a reader opens a file. A database in WAL mode needs its -shm file
// (created beside it) even to read; where that cannot be made (read-only
// media, a directory the user cannot write) and the -wal holds nothing, the
// file is opened `immutable` (SQLite then takes no locks and makes no files).
struct ReadOpenFacts {
  bool wal_mode = false;      // the header says WAL (bytes 18-19 are 2)
  bool dir_writable = false;  // -shm can be created beside the file
  bool wal_has_data = false;  // a -wal file with frames in it exists
  bool shm_exists = false;
  bool shm_writable = false;
};
enum class ReadOpenMode {
  kReadOnly,        // SQLITE_OPEN_READONLY
  kImmutable,       // read-only, file:...?immutable=1
  kWalUnreachable,  // commits sit in the -wal and SQLite cannot read them here
};
ReadOpenMode DecideReadOpen(const ReadOpenFacts& facts);
ReadOpenFacts GatherReadOpenFacts(const std::string& path);
// The file: URI of `path` with `query` appended (e.g. "immutable=1").
std::string FileUri(const std::string& path, const std::string& query);
// Opens `path` for reading as DecideReadOpen says (and, when a plain
// read-only open cannot read a WAL file whose -wal is empty, immutable).
// `extra_flags` is added to SQLITE_OPEN_READONLY. On failure *db is closed.
absl::Status OpenForReading(const std::string& path, int extra_flags, sqlite3** db);

// Checks that `db` (opened from `path`) is a shardscope database this build can
// read, and returns its schema version through `version`. With `allow_empty`, an
// SQLite file with no tables at all passes with version 0 (a fresh file to set up),
// and so does one whose schema an older shardscope left half made (a `meta` table
// without rows, only shardscope's tables): the writer completes it. Without it,
// both are refused as "left unfinished".
absl::Status CheckShardscopeDb(sqlite3* db, const std::string& path, bool allow_empty,
                               int* version);

}  // namespace shardscope::store::internal
