// Native reads of the `slices` view for shardscope's own connections (see
// slice_vtab.h): a table-valued function that decodes one chunk, and TEMP
// views over it that shadow the JSON views of the same names.
#include "store/slice_vtab.h"

#include <sqlite3.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "store/schema.h"
#include "store/sim_timeline.h"
#include "store/slice_chunks.h"
#include "store/sqlite_util.h"

namespace shardscope::store::internal {
namespace {

// Visible columns, then the hidden ones that take the function's arguments.
enum Column {
  kSliceId, kStart, kDur, kDepth, kParent, kNameId, kKind, kOpId, kFlowId, kBytes, kArrival, kWait, kCategory,
  kArgChunkId, kArgStart, kArgFirstId, kArgCount, kArgText, kNumColumns
};
constexpr int kFirstArg = kArgChunkId, kNumArgs = kNumColumns - kArgChunkId;

struct Cursor {
  sqlite3_vtab_cursor base;
  std::vector<TimelineSlice> rows;
  size_t i = 0;
};

int Connect(sqlite3* db, void*, int, const char* const*, sqlite3_vtab** out, char**) {
  int rc = sqlite3_declare_vtab(
      db,
      "CREATE TABLE x(slice_id, start_ns, dur_ns, depth, parent_id, name_id, kind, op_id, flow_id, bytes,"
      " arrival_ns, wait_ns, category_id, chunk_id HIDDEN, chunk_start HIDDEN, first_slice_id HIDDEN,"
      " count HIDDEN, slices HIDDEN)");
  if (rc != SQLITE_OK) return rc;
  auto* vtab = static_cast<sqlite3_vtab*>(sqlite3_malloc(sizeof(sqlite3_vtab)));
  if (!vtab) return SQLITE_NOMEM;
  std::memset(vtab, 0, sizeof *vtab);
  *out = vtab;
  return SQLITE_OK;
}

int Disconnect(sqlite3_vtab* vtab) {
  sqlite3_free(vtab);
  return SQLITE_OK;
}

// Usable only with every argument given (as the views give them).
int BestIndex(sqlite3_vtab*, sqlite3_index_info* info) {
  int have = 0;
  for (int c = 0; c < info->nConstraint; ++c) {
    const auto& k = info->aConstraint[c];
    if (k.iColumn < kFirstArg || k.op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
    if (!k.usable) return SQLITE_CONSTRAINT;
    info->aConstraintUsage[c].argvIndex = k.iColumn - kFirstArg + 1;
    info->aConstraintUsage[c].omit = 1;
    have |= 1 << (k.iColumn - kFirstArg);
  }
  if (have != (1 << kNumArgs) - 1) return SQLITE_CONSTRAINT;
  info->estimatedCost = 100;
  info->estimatedRows = kChunkSlices / 2;
  return SQLITE_OK;
}

int Open(sqlite3_vtab*, sqlite3_vtab_cursor** out) {
  auto* c = new (std::nothrow) Cursor();
  if (!c) return SQLITE_NOMEM;
  std::memset(&c->base, 0, sizeof c->base);
  *out = &c->base;
  return SQLITE_OK;
}

int Close(sqlite3_vtab_cursor* cur) {
  delete reinterpret_cast<Cursor*>(cur);
  return SQLITE_OK;
}

int Filter(sqlite3_vtab_cursor* cur, int, const char*, int argc, sqlite3_value** argv) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  c->rows.clear();
  c->i = 0;
  if (argc != kNumArgs) return SQLITE_ERROR;
  ChunkHeader h;
  h.chunk_id = sqlite3_value_int64(argv[0]);
  h.start_ns = sqlite3_value_int64(argv[1]);
  h.first_slice_id = sqlite3_value_int64(argv[2]);
  h.count = sqlite3_value_int64(argv[3]);
  const unsigned char* text = sqlite3_value_text(argv[4]);
  const int bytes = sqlite3_value_bytes(argv[4]);
  absl::Status st = DecodeChunk(h, text ? std::string_view(reinterpret_cast<const char*>(text), bytes) : "", &c->rows);
  if (!st.ok()) {
    sqlite3_free(cur->pVtab->zErrMsg);
    cur->pVtab->zErrMsg = sqlite3_mprintf("%s", std::string(st.message()).c_str());
    return SQLITE_CORRUPT;  // the reader names the file and `shardscope check`
  }
  return SQLITE_OK;
}

int Next(sqlite3_vtab_cursor* cur) {
  ++reinterpret_cast<Cursor*>(cur)->i;
  return SQLITE_OK;
}

int Eof(sqlite3_vtab_cursor* cur) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  return c->i >= c->rows.size();
}

void IntOrNull(sqlite3_context* ctx, int64_t v, bool present) {
  present ? sqlite3_result_int64(ctx, v) : sqlite3_result_null(ctx);
}

int ColumnValue(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
  const TimelineSlice& s = reinterpret_cast<Cursor*>(cur)->rows[reinterpret_cast<Cursor*>(cur)->i];
  switch (col) {
    case kSliceId: sqlite3_result_int64(ctx, s.slice_id); break;
    case kStart: sqlite3_result_int64(ctx, s.start_ns); break;
    case kDur: sqlite3_result_int64(ctx, s.dur_ns); break;
    case kDepth: sqlite3_result_int64(ctx, s.depth); break;
    case kParent: IntOrNull(ctx, s.parent_id, s.parent_id >= 0); break;
    case kNameId: sqlite3_result_int64(ctx, s.name_id); break;
    case kKind: sqlite3_result_text(ctx, TimelineKindName(s.kind), -1, SQLITE_STATIC); break;
    case kOpId: IntOrNull(ctx, s.op_id, s.op_id >= 0); break;
    case kFlowId: IntOrNull(ctx, s.flow_id, s.flow_id >= 0); break;
    case kBytes: sqlite3_result_int64(ctx, s.bytes); break;
    case kArrival: IntOrNull(ctx, s.arrival_ns, s.arrival_ns >= 0); break;
    case kWait: IntOrNull(ctx, s.start_ns - s.arrival_ns, s.arrival_ns >= 0); break;
    case kCategory: IntOrNull(ctx, s.category_id, s.category_id > 0); break;
    default: sqlite3_result_null(ctx); break;
  }
  return SQLITE_OK;
}

int Rowid(sqlite3_vtab_cursor* cur, sqlite3_int64* rowid) {
  *rowid = static_cast<sqlite3_int64>(reinterpret_cast<Cursor*>(cur)->i);
  return SQLITE_OK;
}

sqlite3_module MakeModule() {
  sqlite3_module m;
  std::memset(&m, 0, sizeof m);
  m.iVersion = 0;
  m.xCreate = nullptr;  // eponymous only: it exists in every schema, stored nowhere
  m.xConnect = Connect;
  m.xBestIndex = BestIndex;
  m.xDisconnect = Disconnect;
  m.xDestroy = Disconnect;
  m.xOpen = Open;
  m.xClose = Close;
  m.xFilter = Filter;
  m.xNext = Next;
  m.xEof = Eof;
  m.xColumn = ColumnValue;
  m.xRowid = Rowid;
  return m;
}

const sqlite3_module kModule = MakeModule();

// The schema's CREATE VIEW statement for `name`, or "".
std::string ViewSql(const std::string& schema, const std::string& name) {
  const std::string head = "CREATE VIEW IF NOT EXISTS " + name + " AS";
  size_t b = schema.find(head);
  if (b == std::string::npos) return "";
  // Each view ends at the first ';' that ends a line.
  size_t e = schema.find(";\n", b);
  if (e == std::string::npos) return "";
  return schema.substr(b, e + 1 - b);
}

}  // namespace

absl::Status InstallNativeSlices(sqlite3* db) {
  if (int rc = sqlite3_create_module_v2(db, "shardscope_chunk_slices", &kModule, nullptr, nullptr); rc != SQLITE_OK)
    return absl::InternalError(absl::StrCat("registering the chunk reader: ", sqlite3_errstr(rc)));
  // Only where slices are chunked (a version-1 file has a real table).
  sqlite3_stmt* q = nullptr;
  bool chunked = false;
  if (sqlite3_prepare_v2(db, "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = 'slice_chunks'", -1,
                         &q, nullptr) == SQLITE_OK) {
    chunked = sqlite3_step(q) == SQLITE_ROW;
  }
  sqlite3_finalize(q);
  if (!chunked) return absl::OkStatus();
  std::string sql =
      "CREATE TEMP VIEW IF NOT EXISTS slices AS SELECT c.run_id, s.slice_id, c.track_id, s.start_ns, s.dur_ns,"
      " s.depth, s.parent_id, s.name_id, s.kind, c.step, c.graph_id, s.op_id, s.flow_id, s.bytes, s.arrival_ns,"
      " s.wait_ns, s.category_id FROM main.slice_chunks c,"
      " shardscope_chunk_slices(c.chunk_id, c.start_ns, c.first_slice_id, c.count, c.slices) s";
  // Simulated runs' slices, made from their schedules (store/sim_timeline.h).
  absl::StrAppend(&sql, InstallSimSlices(db), ";");
  // The views over slices, made again in temp so that they read the native
  // view (a view in main always reads main's objects).
  const std::string schema = SchemaSql();
  for (const char* view : {"events", "step_device_summary", "kernel_stats", "time_by_source_line",
                           "time_by_module_path"}) {
    std::string v = ViewSql(schema, view);
    if (v.empty()) continue;
    absl::StrAppend(&sql, absl::StrReplaceAll(v, {{"CREATE VIEW IF NOT EXISTS", "CREATE TEMP VIEW IF NOT EXISTS"}}));
  }
  if (absl::Status st = Exec(db, sql); !st.ok()) {
    // A file whose tables lack what these views read (it still reads through
    // its own views): drop what was made.
    Exec(db, "DROP VIEW IF EXISTS temp.slices; DROP VIEW IF EXISTS temp.events;"
             " DROP VIEW IF EXISTS temp.step_device_summary; DROP VIEW IF EXISTS temp.kernel_stats;"
             " DROP VIEW IF EXISTS temp.time_by_source_line; DROP VIEW IF EXISTS temp.time_by_module_path;")
        .IgnoreError();
  }
  return absl::OkStatus();
}

}  // namespace shardscope::store::internal
