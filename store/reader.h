// Read side of the store: opens a shardscope database read-only, checks that it
// is one, and answers SQL. Reports, the CLI and the desktop app read runs only
// through this, so a run stored long ago reads exactly like a fresh one.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

struct sqlite3;
struct sqlite3_stmt;

namespace shardscope::store {

// One result cell: SQL NULL is nullopt; numbers are kept as text too.
using Cell = std::optional<std::string>;

struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;

  // Column index by name, or -1.
  int Col(const std::string& name) const;
  // Typed access helpers; a NULL or missing cell gives the default.
  int64_t Int(size_t row, const std::string& col, int64_t dflt = 0) const;
  double Real(size_t row, const std::string& col, double dflt = 0) const;
  std::string Text(size_t row, const std::string& col, const std::string& dflt = "") const;
};

// A result with each cell's SQLite storage class beside it, for output that
// keeps numbers numbers (`shardscope query --format json`). A blob's cell is
// its bytes as an SQL literal, X'0A1B'.
enum class CellType { kNull, kInteger, kReal, kText, kBlob };
struct TypedQueryResult : QueryResult {
  std::vector<std::vector<CellType>> types;  // per row, per column
};

class Reader {
 public:
  // Opens `path` read-only (immutable where its -shm cannot be made and its
  // -wal holds nothing: read-only media, a copy without its -wal). Errors name
  // the file and the problem: missing file, not a regular file (a FIFO, a
  // device: refused without opening it), not an SQLite file, an SQLite file
  // without shardscope's `meta` table, or one a run left unfinished.
  //
  // kAnyThread lets several threads share the connection (SQLite serializes
  // every call with a mutex); kOneThread is for a reader that one thread owns
  // (the app's timeline loader, the CLI): without the mutex, reading a
  // column costs a third less, which is most of a whole-run summary query.
  enum class Threads { kAnyThread, kOneThread };
  static absl::StatusOr<Reader> Open(const std::string& path, Threads threads = Threads::kAnyThread);
  // A reader over a connection that stays the caller's to close (the writer's
  // thread reads the rows it has not committed yet this way).
  static Reader OnConnection(sqlite3* db);
  Reader(Reader&&) noexcept;
  Reader& operator=(Reader&&) noexcept;
  ~Reader();

  // Runs one SQL statement; `params` bind to ?1, ?2, ... as text or integers
  // (a param that parses fully as an integer binds as one). A damaged file
  // (SQLITE_CORRUPT, SQLITE_NOTADB) gives DataLoss naming the file and
  // `shardscope check`.
  absl::StatusOr<QueryResult> Query(const std::string& sql,
                                    const std::vector<std::string>& params = {}) const;
  // The same, with each cell's storage class (TypedQueryResult): a REAL as the
  // shortest text that reads back as the same double (SQLite's own text keeps
  // 15 digits), a BLOB as X'0AFF'.
  absl::StatusOr<TypedQueryResult> QueryTyped(const std::string& sql) const;
  // QueryTyped a row at a time, for results too large to hold (`query`).
  absl::Status StreamTyped(const std::string& sql,
                           const std::function<void(const std::vector<std::string>&)>& columns,
                           const std::function<void(const std::vector<Cell>&, const std::vector<CellType>&)>& each)
      const;
  // The same, one row at a time without keeping the rows (exports of whole runs).
  absl::Status ForEachRow(const std::string& sql, const std::vector<std::string>& params,
                          const std::function<void(const std::vector<Cell>&)>& row) const;

  // The same for a query of integers, without making text of them (the
  // kernels of a 10M-slice run): NULL reads as `null_value`.
  absl::Status ForEachIntRow(const std::string& sql, const std::vector<std::string>& params, int64_t null_value,
                             const std::function<void(const std::vector<int64_t>&)>& row) const;

  // The newest run's id, or NotFound when the database holds no runs.
  absl::StatusOr<int64_t> LatestRunId() const;
  // OK when the file holds run `run_id`; else NotFound, the same words from
  // every command: "run.db has no run 7 (runs: 1-3, 5)".
  absl::Status RequireRun(int64_t run_id) const;
  // Whether the file has a table or view `name`, and whether `table` has
  // `column`: older files lack what later versions added.
  absl::StatusOr<bool> HasTable(const std::string& name) const;
  absl::StatusOr<bool> HasColumn(const std::string& table, const std::string& column) const;
  int schema_version() const { return schema_version_; }
  // The connection, for the store's own readers that decode many rows
  // (store/timeline.h); everyone else goes through Query.
  sqlite3* connection() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  Reader() = default;
  absl::Status Stream(const std::string& sql, const std::vector<std::string>& params,
                      const std::function<void(const std::vector<std::string>&)>& columns,
                      const std::function<void(const std::vector<Cell>&)>& each,
                      const std::function<void(sqlite3_stmt*)>& raw_row = nullptr) const;
  absl::Status Failed(const char* what) const;
  sqlite3* db_ = nullptr;
  bool owned_ = true;
  std::string path_;
  int schema_version_ = 0;
};

// "(2049, 2050)": the track ids of run `run_id` on `clock`, as an SQL list
// ("(NULL)" when none), to filter `slices` by. A literal list reaches a
// simulated run's chip lanes (made on demand) where `IN (SELECT ...)` does
// not: SQLite pushes no subquery into the view's arms, and every chip of a
// pod was made to be filtered out.
absl::StatusOr<std::string> TrackIdList(const Reader& reader, int64_t run_id, const std::string& clock);
// The same for chip `device_id`'s tracks, every clock.
absl::StatusOr<std::string> ChipTrackIdList(const Reader& reader, int64_t run_id, int64_t device_id);

}  // namespace shardscope::store
