// SQLite helpers for store/ (see sqlite_util.h).
#include "store/sqlite_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
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
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) st = SqliteStatus(rc, DbError(db_));
  sqlite3_reset(s_);
  sqlite3_clear_bindings(s_);
  return st;
}

std::string_view ColumnView(sqlite3_stmt* s, int col) {
  const unsigned char* text = sqlite3_column_text(s, col);
  return text ? std::string_view(reinterpret_cast<const char*>(text), sqlite3_column_bytes(s, col)) : "";
}

absl::Status Exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err); rc != SQLITE_OK) {
    std::string msg = err ? err : DbError(db);
    sqlite3_free(err);
    return SqliteStatus(rc, std::move(msg));
  }
  return absl::OkStatus();
}

absl::Status SqliteStatus(int rc, std::string message) {
  switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
      return absl::OkStatus();
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(std::move(message));
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(std::move(message));
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(std::move(message));
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
    case SQLITE_AUTH:
      return absl::PermissionDeniedError(std::move(message));
    case SQLITE_IOERR:
    case SQLITE_NOMEM:
    case SQLITE_INTERRUPT:
    case SQLITE_ABORT:
    case SQLITE_PROTOCOL:
    case SQLITE_SCHEMA:
    case SQLITE_NOLFS:
      return absl::InternalError(std::move(message));
    default:  // CONSTRAINT, MISMATCH, TOOBIG, RANGE, ERROR ...: the statement, not the file
      return absl::InvalidArgumentError(std::move(message));
  }
}

bool AbortsTransaction(const absl::Status& st) {
  return !st.ok() && !absl::IsInvalidArgument(st) && !absl::IsFailedPrecondition(st);
}

absl::Status CheckRegularFile(const std::string& path, bool may_be_missing) {
  // SQLite's unix VFS opens a file by its full path (symbolic links
  // followed) of at most 512 bytes; past that it says only "unable to open
  // database file".
  {
    const std::string full = FullPath(path);
    if (full.size() >= 512)
      return absl::InvalidArgumentError(absl::StrCat(
          path.size() > 80 ? absl::StrCat(path.substr(0, 80), "...") : path, ": the path is ", full.size(),
          " bytes long in full, and SQLite opens database files by paths under 512 bytes; use a shorter path "
          "(a symbolic link to a file deep down is followed to its full path too, so move or copy the file)"));
  }
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) {
    if (errno == ENOENT && may_be_missing) return absl::OkStatus();
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::PermissionDeniedError(absl::StrCat("cannot look at ", path, ": ", std::strerror(errno)));
  }
  if (S_ISREG(sb.st_mode)) return absl::OkStatus();
  const char* what = S_ISDIR(sb.st_mode)    ? "a directory"
                     : S_ISFIFO(sb.st_mode) ? "a FIFO (named pipe)"
                     : S_ISSOCK(sb.st_mode) ? "a socket"
                     : S_ISCHR(sb.st_mode)  ? "a character device"
                     : S_ISBLK(sb.st_mode)  ? "a block device"
                                            : "not a regular file";
  return absl::InvalidArgumentError(absl::StrCat(
      path, " is ", what, ", not a database file; shardscope databases are regular files"));
}

absl::Status CheckFileHeader(const std::string& path) {
  unsigned char h[100] = {};
  ssize_t n = -1;
  if (int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK); fd >= 0) {
    n = ::pread(fd, h, sizeof h, 0);
    ::close(fd);
  }
  if (n != static_cast<ssize_t>(sizeof h) || std::memcmp(h, "SQLite format 3", 16) != 0) return absl::OkStatus();
  auto be32 = [&](int at) {
    return (static_cast<uint32_t>(h[at]) << 24) | (static_cast<uint32_t>(h[at + 1]) << 16) |
           (static_cast<uint32_t>(h[at + 2]) << 8) | h[at + 3];
  };
  const bool rollback = h[18] == 1 && h[19] == 1, wal_mode = h[18] == 2 && h[19] == 2;
  struct stat wal;
  const bool wal_has_data = ::stat((path + "-wal").c_str(), &wal) == 0 && wal.st_size > 32;
  if (rollback && wal_has_data)
    return absl::FailedPreconditionError(absl::StrCat(
        path, "-wal does not belong to ", path, ": the file is in rollback-journal mode (a finished shardscope file), "
        "which never has a -wal, so that one was left by another database of this name, a run that stopped while "
        "writing it (and the file was replaced since, e.g. copied over). SQLite would read its pages as ", path,
        "'s. Move ", path, "-wal and ", path, "-shm aside (keep them if they hold that other run), then open ", path,
        " again"));
  // The header's page count holds when "version valid for" equals the change
  // counter; in WAL mode the file may lag its -wal, so only a file with no
  // frames waiting is measured.
  const uint32_t page_size = h[16] == 0 && h[17] == 1 ? 65536u : (static_cast<uint32_t>(h[16]) << 8) | h[17];
  const uint32_t pages = be32(28);
  struct stat sb;
  if ((rollback || (wal_mode && !wal_has_data)) && be32(92) == be32(24) && pages > 0 && page_size >= 512 &&
      ::stat(path.c_str(), &sb) == 0) {
    const int64_t expect = static_cast<int64_t>(pages) * page_size;
    if (sb.st_size < expect) {
      const int64_t missing = expect - sb.st_size;
      return absl::DataLossError(absl::StrCat(
          path, " is truncated: its header counts ", pages, " pages of ", page_size, " bytes (", expect,
          " bytes), and the file holds ", sb.st_size, " (", missing, " bytes, ",
          (missing + page_size - 1) / page_size, missing > page_size ? " pages" : " page",
          ", missing from its end). A copy or a download that stopped early cuts a file so: copy it again whole"));
    }
  }
  return absl::OkStatus();
}

namespace {
// PRAGMA user_version as `db` reads it (0: none, or unreadable).
int64_t UserVersion(sqlite3* db) {
  Stmt s;
  if (!s.Prepare(db, "PRAGMA user_version").ok() || sqlite3_step(s.get()) != SQLITE_ROW) return 0;
  return sqlite3_column_int64(s.get(), 0);
}
}  // namespace

absl::Status CheckWalBelongs(const std::string& path, sqlite3* db) {
  const ReadOpenFacts f = GatherReadOpenFacts(path);
  if (!f.wal_mode || !f.wal_has_data) return absl::OkStatus();
  sqlite3* main_only = nullptr;
  int64_t in_main = 0;
  if (sqlite3_open_v2(FileUri(path, "immutable=1").c_str(), &main_only, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
                      nullptr) == SQLITE_OK)
    in_main = UserVersion(main_only);
  sqlite3_close(main_only);
  if (in_main == 0) return absl::OkStatus();
  const int64_t through_wal = UserVersion(db);
  if (through_wal == in_main) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      path, "-wal does not belong to ", path, ": it holds another database's pages (its header's file id ",
      through_wal, ", and ", path, "'s is ", in_main, "), left by another file of this name, a run that stopped "
      "while writing it (and the file was replaced since, e.g. copied over). SQLite would read its pages as ", path,
      "'s. Move ", path, "-wal and ", path, "-shm aside (keep them if they hold that other run), then open ", path,
      " again"));
}

absl::Status DamagedFileError(const std::string& path, const std::string& detail) {
  return absl::DataLossError(absl::StrCat(path, " is damaged (", detail, "); run `shardscope check ", path,
                                          "` for details"));
}

const std::set<std::string>& SchemaObjectNames() {
  static const std::set<std::string>* names = [] {
    auto* out = new std::set<std::string>;
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) == SQLITE_OK &&
        Exec(db, SchemaSql()).ok() && Exec(db, ViewTriggersSql()).ok()) {
      Stmt s;
      if (s.Prepare(db, "SELECT name FROM sqlite_master").ok()) {
        while (sqlite3_step(s.get()) == SQLITE_ROW) {
          out->insert(reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 0)));
        }
      }
    }
    sqlite3_close(db);
    return out;
  }();
  return *names;
}

namespace {
std::string DirOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}
}  // namespace

std::string FullPath(const std::string& path) {
  const size_t slash = path.rfind('/');
  char* real = ::realpath(DirOf(path).c_str(), nullptr);
  if (!real) return path;
  std::string full = absl::StrCat(real, std::string_view(real) == "/" ? "" : "/",
                                  slash == std::string::npos ? path : path.substr(slash + 1));
  std::free(real);
  return full;
}

ReadOpenMode DecideReadOpen(const ReadOpenFacts& f) {
  if (!f.wal_mode) return ReadOpenMode::kReadOnly;  // a rollback-journal file reads with no side files
  if (f.dir_writable || (f.shm_exists && f.shm_writable)) return ReadOpenMode::kReadOnly;
  if (!f.wal_has_data) return ReadOpenMode::kImmutable;  // nothing in the -wal to miss
  // SQLite reads a WAL file through an existing read-only -shm, but cannot make one.
  return f.shm_exists ? ReadOpenMode::kReadOnly : ReadOpenMode::kWalUnreachable;
}

ReadOpenFacts GatherReadOpenFacts(const std::string& path) {
  ReadOpenFacts f;
  if (int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK); fd >= 0) {
    unsigned char header[20] = {};
    ssize_t n = ::pread(fd, header, sizeof header, 0);
    ::close(fd);
    f.wal_mode = n == static_cast<ssize_t>(sizeof header) && std::memcmp(header, "SQLite format 3", 16) == 0 &&
                 header[18] == 2 && header[19] == 2;
  }
  f.dir_writable = ::access(DirOf(path).c_str(), W_OK) == 0;
  struct stat sb;
  f.wal_has_data = ::stat((path + "-wal").c_str(), &sb) == 0 && sb.st_size > 32;  // more than its header
  f.shm_exists = ::stat((path + "-shm").c_str(), &sb) == 0;
  f.shm_writable = f.shm_exists && ::access((path + "-shm").c_str(), W_OK) == 0;
  return f;
}

std::string FileUri(const std::string& path, const std::string& query) {
  std::string abs = path;
  if (abs.empty() || abs[0] != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd)) abs = absl::StrCat(cwd, "/", path);
  }
  std::string out = "file://";
  for (unsigned char c : abs) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789ABCDEF";
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (!query.empty()) absl::StrAppend(&out, "?", query);
  return out;
}

namespace {
// Plays a hot journal back into its database: opening the file for writing
// and reading it is what makes SQLite roll the stopped transaction back,
// leaving what was committed (nothing committed is lost; the journal holds
// only the pages as they were before the transaction).
absl::Status RollBackHotJournal(const std::string& path) {
  const std::string journal = path + "-journal";
  const std::string why = absl::StrCat(path, " has a hot journal (", journal,
                                       "): a process stopped in the middle of writing it, and its last transaction "
                                       "must be rolled back before the file can be read");
  sqlite3* rw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &rw, SQLITE_OPEN_READWRITE, nullptr);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(rw, 5000);
    rc = sqlite3_exec(rw, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
  }
  const std::string error = rw ? sqlite3_errmsg(rw) : "out of memory";
  sqlite3_close(rw);
  if (rc != SQLITE_OK)
    return absl::FailedPreconditionError(absl::StrCat(
        why, ", and this process cannot write it (", error, "); copy both files to a writable directory and read "
        "the copy, or open it once with `sqlite3 ", path, "`"));
  return absl::OkStatus();
}
}  // namespace

absl::Status OpenForReading(const std::string& path, int extra_flags, sqlite3** db) {
  *db = nullptr;
  ReadOpenFacts facts = GatherReadOpenFacts(path);
  ReadOpenMode mode = DecideReadOpen(facts);
  if (mode == ReadOpenMode::kWalUnreachable) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": its last commits are in ", path, "-wal, and SQLite cannot read them here (it must make ", path,
        "-shm beside the file, and the directory is read-only); copy both files to a writable directory and "
        "read the copy"));
  }
  auto open = [&](bool immutable) {
    if (*db) sqlite3_close(*db);
    *db = nullptr;
    int flags = SQLITE_OPEN_READONLY | extra_flags;
    int rc = immutable ? sqlite3_open_v2(FileUri(path, "immutable=1").c_str(), db, flags | SQLITE_OPEN_URI, nullptr)
                       : sqlite3_open_v2(path.c_str(), db, flags, nullptr);
    return rc;
  };
  bool immutable = mode == ReadOpenMode::kImmutable;
  if (open(immutable) != SQLITE_OK) {
    absl::Status st = absl::InvalidArgumentError(absl::StrCat("cannot open ", path, ": ", DbError(*db)));
    sqlite3_close(*db);
    *db = nullptr;
    return st;
  }
  if (!immutable) {
    // A writer in another process may hold the file for a moment (a
    // rollback-journal file locks readers out while it commits): wait, as
    // SQLite does, rather than read pages a transaction has not committed.
    sqlite3_busy_timeout(*db, 5000);
    Stmt probe;
    int rc = probe.Prepare(*db, "SELECT count(*) FROM sqlite_master").ok() ? sqlite3_step(probe.get())
                                                                           : sqlite3_errcode(*db);
    const int extended = rc == SQLITE_ROW ? SQLITE_OK : sqlite3_extended_errcode(*db);
    probe = Stmt();
    int code = rc & 0xff;
    if (extended == SQLITE_READONLY_ROLLBACK) {
      // A hot journal: a writer stopped mid-transaction. The file's committed
      // state is the file with the journal played back, which only a
      // connection that may write can do (as sqlite3 does on opening it).
      sqlite3_close(*db);
      *db = nullptr;
      if (absl::Status st = RollBackHotJournal(path); !st.ok()) return st;
      if (open(/*immutable=*/false) != SQLITE_OK) {
        absl::Status st = absl::InvalidArgumentError(absl::StrCat("cannot open ", path, ": ", DbError(*db)));
        sqlite3_close(*db);
        *db = nullptr;
        return st;
      }
      sqlite3_busy_timeout(*db, 5000);
      return absl::OkStatus();
    }
    if (code == SQLITE_BUSY) {
      sqlite3_close(*db);
      *db = nullptr;
      return absl::UnavailableError(absl::StrCat(
          path, " is locked by another process in the middle of writing it (SQLite: database is locked, waited 5 s); "
                "read it again when that process has committed or ended"));
    }
    // Where a WAL file's side files cannot be made after all (a full disk, a
    // file system without locks), read the file as it stands: nothing is in
    // its -wal. A rollback-journal file needs no side files to be read, and
    // reading it as immutable could show a transaction's uncommitted pages.
    if (facts.wal_mode && !facts.wal_has_data &&
        (code == SQLITE_CANTOPEN || code == SQLITE_READONLY || code == SQLITE_IOERR || code == SQLITE_FULL ||
         code == SQLITE_PERM)) {
      if (open(/*immutable=*/true) != SQLITE_OK) {
        absl::Status st = absl::InvalidArgumentError(absl::StrCat("cannot open ", path, ": ", DbError(*db)));
        sqlite3_close(*db);
        *db = nullptr;
        return st;
      }
    }
  }
  if (absl::Status st = CheckWalBelongs(path, *db); !st.ok()) {
    sqlite3_close(*db);
    *db = nullptr;
    return st;
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
      return absl::InvalidArgumentError(absl::StrCat(
          path, " is not an SQLite database (", DbError(db), "); if it was one, `shardscope check ", path,
          "` says what is wrong"));
    }
    if (code == SQLITE_CORRUPT) return DamagedFileError(path, DbError(db));
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", path, ": ", DbError(db)));
  }
  int64_t objects = sqlite3_column_int64(count.get(), 0);
  bool has_meta = sqlite3_column_int64(count.get(), 1) > 0;
  count = Stmt();
  const std::string unfinished = absl::StrCat(
      path, " was left unfinished by a shardscope run that stopped while creating it; remove it or run again "
      "to complete it");
  if (objects == 0) {
    if (allow_empty) return absl::OkStatus();
    // A run in progress keeps its file in WAL mode with everything in the
    // -wal until it ends: a copy of the file alone has nothing in it, as a
    // file whose writer stopped right after setting WAL mode. (Opening it may
    // have made an empty -wal.)
    if (const ReadOpenFacts f = GatherReadOpenFacts(path); f.wal_mode && !f.wal_has_data)
      return absl::FailedPreconditionError(absl::StrCat(
          path, " has no tables yet, and its header says WAL mode: either it was left unfinished by a shardscope run "
          "that stopped while creating it (remove it or run again to complete it), or it is a copy of a file whose "
          "run was still writing it, and its contents are in ", path, "-wal, which is not here (copy ", path,
          "-wal beside it, or copy the file again after its run ended)"));
    return absl::FailedPreconditionError(absl::StrCat(
        path, " has no tables yet (no 'meta' table): it was left unfinished by a shardscope run that stopped while "
        "creating it, or is an empty file; remove it or run again to complete it"));
  }
  if (has_meta) {
    // An older shardscope made the schema one statement at a time and wrote
    // the meta rows last: a file it left half made has an empty meta table
    // and nothing but shardscope's tables, indexes and views.
    Stmt probe;
    bool empty_meta = probe.Prepare(db, "SELECT count(*) FROM meta").ok() &&
                      sqlite3_step(probe.get()) == SQLITE_ROW && sqlite3_column_int64(probe.get(), 0) == 0;
    probe = Stmt();
    bool ours_only = empty_meta;
    if (empty_meta && probe.Prepare(db, "SELECT name FROM sqlite_master WHERE substr(name, 1, 7) <> 'sqlite_'").ok()) {
      const std::set<std::string>& known = SchemaObjectNames();
      while (sqlite3_step(probe.get()) == SQLITE_ROW) {
        const unsigned char* name = sqlite3_column_text(probe.get(), 0);
        if (!name || !known.count(reinterpret_cast<const char*>(name))) ours_only = false;
      }
    }
    // ... unless it holds runs: then its meta rows were lost from a whole
    // file, and removing it would throw those runs away.
    int64_t runs = 0;
    if (ours_only && probe.Prepare(db, "SELECT count(*) FROM runs").ok() &&
        sqlite3_step(probe.get()) == SQLITE_ROW)
      runs = sqlite3_column_int64(probe.get(), 0);
    probe = Stmt();
    if (ours_only && runs > 0) {
      // Which version wrote it, from the tables each version added.
      int version = 1;
      for (const auto& [table, v] :
           {std::pair<const char*, int>{"slice_chunks", 2}, {"slice_summary_groups", 3}, {"shard_placement_spans", 4}})
        if (probe.Prepare(db, absl::StrCat("SELECT 1 FROM sqlite_master WHERE name = '", table, "'")).ok() &&
            sqlite3_step(probe.get()) == SQLITE_ROW)
          version = std::max(version, v);
      probe = Stmt();
      std::string quoted = path;  // for a shell, in single quotes
      absl::StrReplaceAll({{"'", "'\\''"}}, &quoted);
      return absl::DataLossError(absl::StrCat(
          path, " has lost its meta rows (tool, schema_version) but holds ", runs,
          runs == 1 ? " run" : " runs", ": do not remove it. To read it again, put them back: sqlite3 '",
          quoted, "' \"INSERT INTO meta VALUES ('tool', 'shardscope'), ('schema_version', '", version,
          "')\" (its tables are those of schema version ", version, "), then run `shardscope check`"));
    }
    if (ours_only) {
      if (allow_empty) return absl::OkStatus();
      return absl::FailedPreconditionError(unfinished);
    }
  }
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
