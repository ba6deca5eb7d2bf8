// Read side of the store (see reader.h): read-only connection, shardscope
// check, and a generic Query that returns every cell as text.
#include "store/reader.h"
#include "store/slice_vtab.h"

#include <cmath>
#include <charconv>
#include <functional>

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "store/schema.h"
#include "store/sqlite_util.h"

namespace shardscope::store {

int QueryResult::Col(const std::string& name) const {
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] == name) return static_cast<int>(i);
  }
  return -1;
}

int64_t QueryResult::Int(size_t row, const std::string& col, int64_t dflt) const {
  int c = Col(col);
  if (c < 0 || row >= rows.size() || !rows[row][c]) return dflt;
  int64_t v;
  if (absl::SimpleAtoi(*rows[row][c], &v)) return v;
  double d;  // a REAL column read as an integer
  return absl::SimpleAtod(*rows[row][c], &d) ? static_cast<int64_t>(d) : dflt;
}

double QueryResult::Real(size_t row, const std::string& col, double dflt) const {
  int c = Col(col);
  if (c < 0 || row >= rows.size() || !rows[row][c]) return dflt;
  double v;
  return absl::SimpleAtod(*rows[row][c], &v) ? v : dflt;
}

std::string QueryResult::Text(size_t row, const std::string& col, const std::string& dflt) const {
  int c = Col(col);
  if (c < 0 || row >= rows.size() || !rows[row][c]) return dflt;
  return *rows[row][c];
}

absl::StatusOr<Reader> Reader::Open(const std::string& path, Threads threads) {
  // stat, never open, what may not be a file: opening a FIFO blocks.
  if (absl::Status st = internal::CheckRegularFile(path, /*may_be_missing=*/false); !st.ok()) return st;
  if (absl::Status st = internal::CheckFileHeader(path); !st.ok()) return st;
  Reader r;
  r.path_ = path;
  // Read-only, and immutable where the file's side files cannot be made
  // (read-only media, a WAL file copied without its -wal).
  const int mutex = threads == Threads::kAnyThread ? SQLITE_OPEN_FULLMUTEX : SQLITE_OPEN_NOMUTEX;
  if (absl::Status st = internal::OpenForReading(path, mutex, &r.db_); !st.ok()) return st;
  sqlite3_busy_timeout(r.db_, 5000);
  // Timelines are read in large ranges: map the file rather than copy each
  // page through read(), and keep more of it cached (64 MiB).
  sqlite3_exec(r.db_, "PRAGMA mmap_size = 1073741824; PRAGMA cache_size = -65536;", nullptr, nullptr, nullptr);
  if (absl::Status st =
          internal::CheckShardscopeDb(r.db_, path, /*allow_empty=*/false, &r.schema_version_);
      !st.ok()) {
    return st;
  }
  if (absl::Status st = internal::InstallNativeSlices(r.db_); !st.ok()) return st;
  return r;
}

Reader Reader::OnConnection(sqlite3* db) {
  Reader r;
  r.db_ = db;
  r.owned_ = false;
  r.schema_version_ = kSchemaVersion;
  const char* file = sqlite3_db_filename(db, "main");
  r.path_ = file ? file : "";
  return r;
}

Reader::Reader(Reader&& o) noexcept
    : db_(o.db_), owned_(o.owned_), path_(std::move(o.path_)), schema_version_(o.schema_version_) {
  o.db_ = nullptr;
}

Reader& Reader::operator=(Reader&& o) noexcept {
  if (this != &o) {
    if (db_ && owned_) sqlite3_close(db_);
    db_ = o.db_;
    owned_ = o.owned_;
    path_ = std::move(o.path_);
    schema_version_ = o.schema_version_;
    o.db_ = nullptr;
  }
  return *this;
}

Reader::~Reader() {
  if (db_ && owned_) sqlite3_close(db_);
}

namespace {
// One row's cells as QueryTyped gives them.
void TypedRow(sqlite3_stmt* s, std::vector<Cell>* row, std::vector<CellType>* types) {
  const int n = sqlite3_column_count(s);
  row->assign(n, std::nullopt);
  types->assign(n, CellType::kNull);
  for (int c = 0; c < n; ++c) {
    const int type = sqlite3_column_type(s, c);
    (*types)[c] = type == SQLITE_INTEGER ? CellType::kInteger
                  : type == SQLITE_FLOAT ? CellType::kReal
                  : type == SQLITE_BLOB  ? CellType::kBlob
                  : type == SQLITE_NULL  ? CellType::kNull
                                         : CellType::kText;
    if (type == SQLITE_BLOB) {
      const auto* b = static_cast<const unsigned char*>(sqlite3_column_blob(s, c));
      std::string hex = "X'";
      for (int i = 0, bytes = sqlite3_column_bytes(s, c); i < bytes; ++i)
        absl::StrAppend(&hex, absl::Hex(b[i], absl::kZeroPad2));
      (*row)[c] = absl::AsciiStrToUpper(hex) + "'";
    } else if (type == SQLITE_FLOAT) {
      // Shortest round trip; a whole number keeps ".0" (a REAL, as sqlite3 prints it).
      const double v = sqlite3_column_double(s, c);
      char buf[64];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
      std::string text = ec == std::errc() ? std::string(buf, end) : absl::StrCat(v);
      if (std::isfinite(v) && text.find_first_of(".e") == std::string::npos) text += ".0";
      if (std::isinf(v)) text = v > 0 ? "Inf" : "-Inf";
      (*row)[c] = std::move(text);
    } else if (type != SQLITE_NULL) {
      const char* text = reinterpret_cast<const char*>(sqlite3_column_text(s, c));
      (*row)[c] = std::string(text ? text : "", text ? sqlite3_column_bytes(s, c) : 0);
    }
  }
}
}  // namespace

absl::StatusOr<TypedQueryResult> Reader::QueryTyped(const std::string& sql) const {
  TypedQueryResult out;
  absl::Status st = StreamTyped(
      sql, [&](const std::vector<std::string>& columns) { out.columns = columns; },
      [&](const std::vector<Cell>& row, const std::vector<CellType>& types) {
        out.rows.push_back(row);
        out.types.push_back(types);
      });
  if (!st.ok()) return st;
  return out;
}

absl::Status Reader::StreamTyped(
    const std::string& sql, const std::function<void(const std::vector<std::string>&)>& columns,
    const std::function<void(const std::vector<Cell>&, const std::vector<CellType>&)>& each) const {
  std::vector<Cell> row;
  std::vector<CellType> types;
  return Stream(sql, {}, columns, nullptr, [&](sqlite3_stmt* s) {
    TypedRow(s, &row, &types);
    each(row, types);
  });
}

absl::StatusOr<QueryResult> Reader::Query(const std::string& sql,
                                          const std::vector<std::string>& params) const {
  QueryResult out;
  absl::Status st = Stream(
      sql, params, [&](const std::vector<std::string>& columns) { out.columns = columns; },
      [&](const std::vector<Cell>& row) { out.rows.push_back(row); });
  if (!st.ok()) return st;
  return out;
}

absl::Status Reader::ForEachRow(const std::string& sql, const std::vector<std::string>& params,
                                const std::function<void(const std::vector<Cell>&)>& row) const {
  return Stream(sql, params, nullptr, row);
}

absl::Status Reader::ForEachIntRow(const std::string& sql, const std::vector<std::string>& params, int64_t null_value,
                                   const std::function<void(const std::vector<int64_t>&)>& each) const {
  std::vector<int64_t> row;
  return Stream(sql, params, nullptr, nullptr, [&](sqlite3_stmt* s) {
    const int ncols = sqlite3_column_count(s);
    row.resize(static_cast<size_t>(ncols));
    for (int c = 0; c < ncols; ++c)
      row[c] = sqlite3_column_type(s, c) == SQLITE_NULL ? null_value : sqlite3_column_int64(s, c);
    each(row);
  });
}

absl::Status Reader::Stream(const std::string& sql, const std::vector<std::string>& params,
                            const std::function<void(const std::vector<std::string>&)>& columns,
                            const std::function<void(const std::vector<Cell>&)>& each,
                            const std::function<void(sqlite3_stmt*)>& raw_row) const {
  if (!db_) return absl::FailedPreconditionError("the reader is not open");
  if (absl::StripAsciiWhitespace(sql).empty()) {
    return absl::InvalidArgumentError("the SQL statement is empty");
  }
  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &raw, &tail) !=
      SQLITE_OK) {
    return Failed("SQL error: ");
  }
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> stmt(raw, sqlite3_finalize);
  if (!stmt) return absl::InvalidArgumentError("the SQL text holds no statement");
  // One statement per call, so a caller never silently loses a second one.
  std::string_view rest(tail ? tail : "");
  while (!rest.empty() && (absl::ascii_isspace(rest.front()) || rest.front() == ';')) {
    rest.remove_prefix(1);
  }
  if (!rest.empty()) {
    return absl::InvalidArgumentError("only one SQL statement can be run at a time");
  }
  int nparams = sqlite3_bind_parameter_count(stmt.get());
  if (static_cast<int>(params.size()) > nparams) {
    return absl::InvalidArgumentError(absl::StrCat("the statement takes ", nparams,
                                                   " parameters but ", params.size(),
                                                   " were given"));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    int64_t v;
    if (absl::SimpleAtoi(params[i], &v)) {
      sqlite3_bind_int64(stmt.get(), static_cast<int>(i + 1), v);
    } else {
      sqlite3_bind_text(stmt.get(), static_cast<int>(i + 1), params[i].data(),
                        static_cast<int>(params[i].size()), SQLITE_TRANSIENT);
    }
  }
  int ncols = sqlite3_column_count(stmt.get());
  if (columns) {
    std::vector<std::string> names;
    for (int c = 0; c < ncols; ++c) {
      const char* name = sqlite3_column_name(stmt.get(), c);
      names.push_back(name ? name : "");
    }
    columns(names);
  }
  std::vector<Cell> row;
  for (;;) {
    int rc = sqlite3_step(stmt.get());
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return Failed("SQL error: ");
    if (raw_row) {
      raw_row(stmt.get());
      continue;
    }
    row.clear();
    row.reserve(ncols);
    for (int c = 0; c < ncols; ++c) {
      if (sqlite3_column_type(stmt.get(), c) == SQLITE_NULL) {
        row.emplace_back(std::nullopt);
      } else {
        const char* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), c));
        int n = sqlite3_column_bytes(stmt.get(), c);
        row.emplace_back(std::string(text ? text : "", text ? n : 0));
      }
    }
    each(row);
  }
  return absl::OkStatus();
}

absl::Status Reader::Failed(const char* what) const {
  int code = sqlite3_errcode(db_) & 0xff;
  // A damaged file is not the query's fault: say which file, and what checks it.
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) {
    return internal::DamagedFileError(path_, internal::DbError(db_));
  }
  if (code == SQLITE_IOERR) {
    return absl::InternalError(absl::StrCat("reading ", path_, ": ", internal::DbError(db_)));
  }
  // A table or view of shardscope's own schema missing (dropped or renamed by
  // hand): the file is damaged, not the query wrong; say which file.
  const std::string message = internal::DbError(db_);
  for (const char* prefix : {"no such table: ", "no such view: "}) {
    if (message.rfind(prefix, 0) != 0) continue;
    std::string name = message.substr(std::strlen(prefix));
    if (absl::StartsWith(name, "main.")) name = name.substr(5);
    if (internal::SchemaObjectNames().count(name))
      return absl::DataLossError(absl::StrCat(path_, " lacks `", name, "`, which shardscope writes into every file (",
                                              message, "): was it dropped or renamed? `shardscope check ", path_,
                                              "` says what else is missing"));
  }
  return absl::InvalidArgumentError(absl::StrCat(what, message));
}

absl::StatusOr<bool> Reader::HasTable(const std::string& name) const {
  auto q = Query("SELECT count(*) AS n FROM sqlite_master WHERE name = ?1", {name});
  if (!q.ok()) return q.status();
  return q->Int(0, "n") > 0;
}

absl::StatusOr<bool> Reader::HasColumn(const std::string& table, const std::string& column) const {
  auto q = Query("SELECT count(*) AS n FROM pragma_table_info(?1) WHERE name = ?2", {table, column});
  if (!q.ok()) return q.status();
  return q->Int(0, "n") > 0;
}

absl::StatusOr<int64_t> Reader::LatestRunId() const {
  absl::StatusOr<QueryResult> r = Query("SELECT max(run_id) AS run_id FROM runs");
  if (!r.ok()) return r.status();
  if (r->rows.empty() || !r->rows[0][0]) {
    return absl::NotFoundError(absl::StrCat(path_, " holds no runs yet"));
  }
  return r->Int(0, "run_id");
}

absl::Status Reader::RequireRun(int64_t run_id) const {
  absl::StatusOr<QueryResult> ids = Query("SELECT run_id FROM runs ORDER BY run_id");
  if (!ids.ok()) return ids.status();
  std::vector<int64_t> runs;
  for (size_t i = 0; i < ids->rows.size(); ++i) runs.push_back(ids->Int(i, "run_id"));
  if (std::binary_search(runs.begin(), runs.end(), run_id)) return absl::OkStatus();
  std::vector<std::string> ranges;  // consecutive ids as one range
  for (size_t i = 0; i < runs.size();) {
    size_t j = i;
    while (j + 1 < runs.size() && runs[j + 1] == runs[j] + 1) ++j;
    ranges.push_back(j == i ? absl::StrCat(runs[i]) : absl::StrCat(runs[i], "-", runs[j]));
    i = j + 1;
  }
  return absl::NotFoundError(absl::StrCat(path_, " has no run ", run_id, " (runs: ",
                                          ranges.empty() ? "none" : absl::StrJoin(ranges, ", "), ")"));
}

namespace {
// "(1, 2)" of the track ids `sql` selects, "(NULL)" when none.
absl::StatusOr<std::string> IdList(const Reader& reader, const std::string& sql, const std::vector<std::string>& params) {
  auto q = reader.Query(sql, params);
  if (!q.ok()) return q.status();
  std::string out = "(";
  for (size_t i = 0; i < q->rows.size(); ++i) absl::StrAppend(&out, i ? ", " : "", q->Int(i, "track_id"));
  return q->rows.empty() ? std::string("(NULL)") : out + ")";
}
}  // namespace

absl::StatusOr<std::string> TrackIdList(const Reader& reader, int64_t run_id, const std::string& clock) {
  return IdList(reader, "SELECT track_id FROM tracks WHERE run_id = ?1 AND clock = ?2 ORDER BY track_id",
                {std::to_string(run_id), clock});
}

absl::StatusOr<std::string> ChipTrackIdList(const Reader& reader, int64_t run_id, int64_t device_id) {
  return IdList(reader, "SELECT track_id FROM tracks WHERE run_id = ?1 AND device_id = ?2 ORDER BY track_id",
                {std::to_string(run_id), std::to_string(device_id)});
}

}  // namespace shardscope::store
