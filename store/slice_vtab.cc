// Native reads of the `slices` view for shardscope's own connections (see
// slice_vtab.h): a table-valued function that decodes one chunk, and TEMP
// views over it that shadow the JSON views of the same names.
#include "store/slice_vtab.h"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "store/schema.h"
#include "store/sim_timeline.h"
#include "store/slice_chunks.h"
#include "store/sqlite_util.h"

namespace shardscope::store::internal {
namespace {

template <typename Row>
struct Cursor {
  sqlite3_vtab_cursor base;
  std::vector<Row> rows;
  size_t i = 0;
};
using SliceCursor = Cursor<TimelineSlice>;
using BucketCursor = Cursor<SummaryBucket>;

template <const char* kDeclaration>
int Connect(sqlite3* db, void*, int, const char* const*, sqlite3_vtab** out, char**) {
  int rc = sqlite3_declare_vtab(db, kDeclaration);
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

// Usable only with every argument given (as the views give them): the
// hidden columns from `first_arg` on.
template <int kFirst, int kCount, int kRows>
int BestIndex(sqlite3_vtab*, sqlite3_index_info* info) {
  int have = 0;
  for (int c = 0; c < info->nConstraint; ++c) {
    const auto& k = info->aConstraint[c];
    if (k.iColumn < kFirst || k.op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
    if (!k.usable) return SQLITE_CONSTRAINT;
    info->aConstraintUsage[c].argvIndex = k.iColumn - kFirst + 1;
    info->aConstraintUsage[c].omit = 1;
    have |= 1 << (k.iColumn - kFirst);
  }
  if (have != (1 << kCount) - 1) return SQLITE_CONSTRAINT;
  info->estimatedCost = 100;
  info->estimatedRows = kRows;
  return SQLITE_OK;
}

template <typename Row>
int Open(sqlite3_vtab*, sqlite3_vtab_cursor** out) {
  auto* c = new (std::nothrow) Cursor<Row>();
  if (!c) return SQLITE_NOMEM;
  std::memset(&c->base, 0, sizeof c->base);
  *out = &c->base;
  return SQLITE_OK;
}

template <typename Row>
int Close(sqlite3_vtab_cursor* cur) {
  delete reinterpret_cast<Cursor<Row>*>(cur);
  return SQLITE_OK;
}

template <typename Row>
int Next(sqlite3_vtab_cursor* cur) {
  ++reinterpret_cast<Cursor<Row>*>(cur)->i;
  return SQLITE_OK;
}

template <typename Row>
int Eof(sqlite3_vtab_cursor* cur) {
  auto* c = reinterpret_cast<Cursor<Row>*>(cur);
  return c->i >= c->rows.size();
}

template <typename Row>
int Rowid(sqlite3_vtab_cursor* cur, sqlite3_int64* rowid) {
  *rowid = static_cast<sqlite3_int64>(reinterpret_cast<Cursor<Row>*>(cur)->i);
  return SQLITE_OK;
}

// A damaged row: the reader names the file and `shardscope check`.
int Damaged(sqlite3_vtab_cursor* cur, const absl::Status& st) {
  sqlite3_free(cur->pVtab->zErrMsg);
  cur->pVtab->zErrMsg = sqlite3_mprintf("%s", std::string(st.message()).c_str());
  return SQLITE_CORRUPT;
}

void IntOrNull(sqlite3_context* ctx, int64_t v, bool present) {
  present ? sqlite3_result_int64(ctx, v) : sqlite3_result_null(ctx);
}

// ---- shardscope_chunk_slices(chunk_id, chunk_start, first_slice_id, count, slices): one chunk's slices.

enum SliceColumn {
  kSliceId, kStart, kDur, kDepth, kParent, kNameId, kKind, kOpId, kFlowId, kBytes, kArrival, kWait, kCategory,
  kShape, kArgChunkId, kArgStart, kArgFirstId, kArgCount, kArgText, kNumSliceColumns
};
constexpr char kSliceDeclaration[] =
    "CREATE TABLE x(slice_id, start_ns, dur_ns, depth, parent_id, name_id, kind, op_id, flow_id, bytes,"
    " arrival_ns, wait_ns, category_id, shape_id, chunk_id HIDDEN, chunk_start HIDDEN, first_slice_id HIDDEN,"
    " count HIDDEN, slices HIDDEN)";

// Besides the chunk (every hidden argument, required), `kind = ?` and
// `depth = ?` are filtered here when a query has them (idxNum bits 1 and 2,
// in that order after the chunk's arguments): the report's collectives and
// kernels of a 10M-slice run are then decoded without SQLite stepping over
// every other slice.
enum SliceFilter { kFilterKind = 1, kFilterDepth = 2 };

int SliceBestIndex(sqlite3_vtab*, sqlite3_index_info* info) {
  int have = 0, kind = -1, depth = -1;
  for (int c = 0; c < info->nConstraint; ++c) {
    const auto& k = info->aConstraint[c];
    if (k.op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
    if (k.iColumn >= kArgChunkId) {
      if (!k.usable) return SQLITE_CONSTRAINT;
      info->aConstraintUsage[c].argvIndex = k.iColumn - kArgChunkId + 1;
      info->aConstraintUsage[c].omit = 1;
      have |= 1 << (k.iColumn - kArgChunkId);
    } else if (k.usable && k.iColumn == kKind && kind < 0 &&
               absl::EqualsIgnoreCase(sqlite3_vtab_collation(info, c), "BINARY")) {
      kind = c;  // `kind = 'X' COLLATE NOCASE` is left to SQLite, which compares as asked
    } else if (k.usable && k.iColumn == kDepth && depth < 0) {
      depth = c;
    }
  }
  if (have != (1 << (kNumSliceColumns - kArgChunkId)) - 1) return SQLITE_CONSTRAINT;
  int next = kNumSliceColumns - kArgChunkId + 1;
  info->idxNum = 0;
  for (auto [c, bit] : {std::pair{kind, kFilterKind}, std::pair{depth, kFilterDepth}}) {
    if (c < 0) continue;
    info->aConstraintUsage[c].argvIndex = next++;
    info->aConstraintUsage[c].omit = 1;
    info->idxNum |= bit;
  }
  info->estimatedCost = info->idxNum ? 50 : 100;
  info->estimatedRows = info->idxNum ? kChunkSlices / 8 : kChunkSlices / 2;
  return SQLITE_OK;
}

int FilterSlices(sqlite3_vtab_cursor* cur, int idx, const char*, int argc, sqlite3_value** argv) {
  auto* c = reinterpret_cast<SliceCursor*>(cur);
  c->rows.clear();
  c->i = 0;
  const int want_args = kNumSliceColumns - kArgChunkId + ((idx & kFilterKind) ? 1 : 0) + ((idx & kFilterDepth) ? 1 : 0);
  if (argc != want_args) return SQLITE_ERROR;
  ChunkHeader h;
  h.chunk_id = sqlite3_value_int64(argv[0]);
  h.start_ns = sqlite3_value_int64(argv[1]);
  h.first_slice_id = sqlite3_value_int64(argv[2]);
  h.count = sqlite3_value_int64(argv[3]);
  const unsigned char* text = sqlite3_value_text(argv[4]);
  const int bytes = sqlite3_value_bytes(argv[4]);
  absl::Status st = DecodeChunk(h, text ? std::string_view(reinterpret_cast<const char*>(text), bytes) : "", &c->rows);
  if (!st.ok()) return Damaged(cur, st);
  int arg = kNumSliceColumns - kArgChunkId;
  if (idx & kFilterKind) {
    // The column is text: a value of another type equals no row (SQL's rule without affinity).
    sqlite3_value* v = argv[arg++];
    int code = -1;
    if (sqlite3_value_type(v) == SQLITE_TEXT) {
      const std::string_view want(reinterpret_cast<const char*>(sqlite3_value_text(v)), sqlite3_value_bytes(v));
      for (int k = 0; k < kNumTimelineKinds; ++k)
        if (want == TimelineKindName(static_cast<TimelineKind>(k))) code = k;
    }
    std::erase_if(c->rows, [&](const TimelineSlice& x) { return static_cast<int>(x.kind) != code; });
  }
  if (idx & kFilterDepth) {
    sqlite3_value* v = argv[arg++];
    const int type = sqlite3_value_type(v);
    const bool numeric = type == SQLITE_INTEGER || type == SQLITE_FLOAT;
    const double want = numeric ? sqlite3_value_double(v) : 0;
    std::erase_if(c->rows, [&](const TimelineSlice& x) { return !numeric || static_cast<double>(x.depth) != want; });
  }
  return SQLITE_OK;
}

int SliceColumnValue(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
  const auto* c = reinterpret_cast<SliceCursor*>(cur);
  const TimelineSlice& s = c->rows[c->i];
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
    case kShape: IntOrNull(ctx, s.shape_id, s.shape_id > 0); break;
    default: sqlite3_result_null(ctx); break;
  }
  return SQLITE_OK;
}

// ---- shardscope_summary_buckets(level, depth, first_bucket, slice_base, step_base, n_buckets, buckets):
// one level-of-detail group's buckets, as version 2's slice_summaries rows.

enum BucketColumn {
  kBucket, kCount, kBusy, kKindNs, kLongestId = kKindNs + kNumTimelineKinds, kLongestStart, kLongestDur,
  kLongestName, kLongestKind, kFirstStep, kLastStep,
  kArgLevel, kArgDepth, kArgFirstBucket, kArgSliceBase, kArgStepBase, kArgBuckets, kArgBucketText,
  kNumBucketColumns
};
constexpr char kBucketDeclaration[] =
    "CREATE TABLE x(bucket, count, busy_ns, compute_ns, collective_ns, transfer_ns, host_ns, compile_ns,"
    " host_wait_ns, longest_slice_id, longest_start_ns, longest_dur_ns, longest_name_id, longest_kind,"
    " first_step, last_step, level HIDDEN, depth HIDDEN, first_bucket HIDDEN, slice_base HIDDEN,"
    " step_base HIDDEN, n_buckets HIDDEN, buckets HIDDEN)";

int FilterBuckets(sqlite3_vtab_cursor* cur, int, const char*, int argc, sqlite3_value** argv) {
  auto* c = reinterpret_cast<BucketCursor*>(cur);
  c->rows.clear();
  c->i = 0;
  if (argc != kNumBucketColumns - kArgLevel) return SQLITE_ERROR;
  const unsigned char* text = sqlite3_value_text(argv[6]);
  const int bytes = sqlite3_value_bytes(argv[6]);
  absl::Status st = DecodeGroup(
      static_cast<int>(sqlite3_value_int64(argv[0])),
      static_cast<int16_t>(std::clamp<int64_t>(sqlite3_value_int64(argv[1]), 0, INT16_MAX)),
      sqlite3_value_int64(argv[2]), sqlite3_value_int64(argv[3]), sqlite3_value_int64(argv[4]),
      sqlite3_value_int64(argv[5]), text ? std::string_view(reinterpret_cast<const char*>(text), bytes) : "",
      &c->rows);
  return st.ok() ? SQLITE_OK : Damaged(cur, st);
}

int BucketColumnValue(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
  const auto* c = reinterpret_cast<BucketCursor*>(cur);
  const SummaryBucket& b = c->rows[c->i];
  if (col >= kKindNs && col < kKindNs + kNumTimelineKinds) {
    sqlite3_result_int64(ctx, b.kind_ns[col - kKindNs]);
    return SQLITE_OK;
  }
  switch (col) {
    case kBucket: sqlite3_result_int64(ctx, b.width_ns > 0 ? b.start_ns >> __builtin_ctzll(b.width_ns) : 0); break;
    case kCount: sqlite3_result_int64(ctx, b.count); break;
    case kBusy: sqlite3_result_int64(ctx, b.busy_ns); break;
    case kLongestId: sqlite3_result_int64(ctx, b.longest_slice_id); break;
    case kLongestStart: sqlite3_result_int64(ctx, b.longest_start_ns); break;
    case kLongestDur: sqlite3_result_int64(ctx, b.longest_dur_ns); break;
    case kLongestName: sqlite3_result_int64(ctx, b.longest_name_id); break;
    case kLongestKind: sqlite3_result_int64(ctx, static_cast<int64_t>(b.longest_kind)); break;
    case kFirstStep: IntOrNull(ctx, b.first_step, b.first_step >= 0); break;
    case kLastStep: IntOrNull(ctx, b.last_step, b.last_step >= 0); break;
    default: sqlite3_result_null(ctx); break;
  }
  return SQLITE_OK;
}

// ---- shardscope_chunk_sums(chunk_id, chunk_start, first_slice_id, count, slices): one row per chunk,
// what its depth-0 slices add up to. step_device_summary reads this instead of every slice: a
// 10M-slice run's per-chip step breakdown took 84 s through the slices, one row each.

struct ChunkSums {
  int64_t n0 = 0, start_ns = INT64_MAX, end_ns = INT64_MIN;
  std::array<int64_t, kNumTimelineKinds> kind_ns{};
};
enum SumColumn {
  kSumN0, kSumStart, kSumEnd, kSumCompute, kSumCollective, kSumTransfer, kSumHostWait, kSumBusy,
  kSumArgChunkId, kSumArgStart, kSumArgFirstId, kSumArgCount, kSumArgText, kNumSumColumns
};
constexpr char kSumDeclaration[] =
    "CREATE TABLE x(n0, start_ns, end_ns, compute_ns, collective_ns, transfer_ns, host_wait_ns, busy_ns,"
    " chunk_id HIDDEN, chunk_start HIDDEN, first_slice_id HIDDEN, count HIDDEN, slices HIDDEN)";

int FilterSums(sqlite3_vtab_cursor* cur, int, const char*, int argc, sqlite3_value** argv) {
  auto* c = reinterpret_cast<Cursor<ChunkSums>*>(cur);
  c->rows.clear();
  c->i = 0;
  if (argc != kNumSumColumns - kSumArgChunkId) return SQLITE_ERROR;
  ChunkHeader h;
  h.chunk_id = sqlite3_value_int64(argv[0]);
  h.start_ns = sqlite3_value_int64(argv[1]);
  h.first_slice_id = sqlite3_value_int64(argv[2]);
  h.count = sqlite3_value_int64(argv[3]);
  const unsigned char* text = sqlite3_value_text(argv[4]);
  const int bytes = sqlite3_value_bytes(argv[4]);
  thread_local std::vector<TimelineSlice> slices;
  slices.clear();
  absl::Status st = DecodeChunk(h, text ? std::string_view(reinterpret_cast<const char*>(text), bytes) : "", &slices);
  if (!st.ok()) return Damaged(cur, st);
  ChunkSums sums;
  for (const TimelineSlice& x : slices) {
    if (x.depth != 0) continue;
    ++sums.n0;
    sums.start_ns = std::min(sums.start_ns, x.start_ns);
    sums.end_ns = std::max(sums.end_ns, x.start_ns + x.dur_ns);
    sums.kind_ns[static_cast<int>(x.kind)] += x.dur_ns;
  }
  c->rows.push_back(sums);
  return SQLITE_OK;
}

int SumColumnValue(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
  const auto* c = reinterpret_cast<Cursor<ChunkSums>*>(cur);
  const ChunkSums& x = c->rows[c->i];
  auto kind = [&](TimelineKind k) { return x.kind_ns[static_cast<int>(k)]; };
  switch (col) {
    case kSumN0: sqlite3_result_int64(ctx, x.n0); break;
    case kSumStart: IntOrNull(ctx, x.start_ns, x.n0 > 0); break;
    case kSumEnd: IntOrNull(ctx, x.end_ns, x.n0 > 0); break;
    case kSumCompute: sqlite3_result_int64(ctx, kind(TimelineKind::kCompute)); break;
    case kSumCollective: sqlite3_result_int64(ctx, kind(TimelineKind::kCollective)); break;
    case kSumTransfer: sqlite3_result_int64(ctx, kind(TimelineKind::kTransfer)); break;
    case kSumHostWait: sqlite3_result_int64(ctx, kind(TimelineKind::kHostWait)); break;
    case kSumBusy: {
      int64_t busy = 0;
      for (int k = 0; k < kNumTimelineKinds; ++k)
        if (k != static_cast<int>(TimelineKind::kHostWait)) busy += x.kind_ns[k];
      sqlite3_result_int64(ctx, busy);
      break;
    }
    default: sqlite3_result_null(ctx); break;
  }
  return SQLITE_OK;
}

template <typename Row, const char* kDeclaration, int kFirst, int kCount, int kRows>
sqlite3_module MakeModule(int (*filter)(sqlite3_vtab_cursor*, int, const char*, int, sqlite3_value**),
                          int (*column)(sqlite3_vtab_cursor*, sqlite3_context*, int),
                          int (*best_index)(sqlite3_vtab*, sqlite3_index_info*) = BestIndex<kFirst, kCount, kRows>) {
  sqlite3_module m;
  std::memset(&m, 0, sizeof m);
  m.iVersion = 0;
  m.xCreate = nullptr;  // eponymous only: it exists in every schema, stored nowhere
  m.xConnect = Connect<kDeclaration>;
  m.xBestIndex = best_index;
  m.xDisconnect = Disconnect;
  m.xDestroy = Disconnect;
  m.xOpen = Open<Row>;
  m.xClose = Close<Row>;
  m.xFilter = filter;
  m.xNext = Next<Row>;
  m.xEof = Eof<Row>;
  m.xColumn = column;
  m.xRowid = Rowid<Row>;
  return m;
}

const sqlite3_module kSliceModule =
    MakeModule<TimelineSlice, kSliceDeclaration, kArgChunkId, kNumSliceColumns - kArgChunkId, kChunkSlices / 2>(
        FilterSlices, SliceColumnValue, SliceBestIndex);
const sqlite3_module kSumModule =
    MakeModule<ChunkSums, kSumDeclaration, kSumArgChunkId, kNumSumColumns - kSumArgChunkId, 1>(FilterSums,
                                                                                              SumColumnValue);
const sqlite3_module kBucketModule =
    MakeModule<SummaryBucket, kBucketDeclaration, kArgLevel, kNumBucketColumns - kArgLevel, kGroupBuckets / 2>(
        FilterBuckets, BucketColumnValue);

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

bool HasMainTable(sqlite3* db, const char* name) {
  sqlite3_stmt* q = nullptr;
  bool has = false;
  if (sqlite3_prepare_v2(db, "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ?1", -1, &q, nullptr) ==
      SQLITE_OK) {
    sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
    has = sqlite3_step(q) == SQLITE_ROW;
  }
  sqlite3_finalize(q);
  return has;
}

}  // namespace

absl::Status InstallNativeSlices(sqlite3* db) {
  if (int rc = sqlite3_create_module_v2(db, "shardscope_chunk_slices", &kSliceModule, nullptr, nullptr); rc != SQLITE_OK)
    return absl::InternalError(absl::StrCat("registering the chunk reader: ", sqlite3_errstr(rc)));
  if (int rc = sqlite3_create_module_v2(db, "shardscope_chunk_sums", &kSumModule, nullptr, nullptr); rc != SQLITE_OK)
    return absl::InternalError(absl::StrCat("registering the chunk summer: ", sqlite3_errstr(rc)));
  if (int rc = sqlite3_create_module_v2(db, "shardscope_summary_buckets", &kBucketModule, nullptr, nullptr);
      rc != SQLITE_OK)
    return absl::InternalError(absl::StrCat("registering the summary reader: ", sqlite3_errstr(rc)));
  // Version 3's summaries, natively (before the slices: a version-2 file has
  // chunks and no groups).
  if (HasMainTable(db, "slice_summary_groups")) {
    Exec(db,
         "CREATE TEMP VIEW IF NOT EXISTS slice_summaries AS SELECT g.run_id, g.track_id, g.level, g.depth,"
         " s.bucket, s.count, s.busy_ns, s.compute_ns, s.collective_ns, s.transfer_ns, s.host_ns, s.compile_ns,"
         " s.host_wait_ns, s.longest_slice_id, s.longest_start_ns, s.longest_dur_ns, s.longest_name_id,"
         " s.longest_kind, s.first_step, s.last_step FROM main.slice_summary_groups g,"
         " shardscope_summary_buckets(g.level, g.depth, g.first_bucket, g.slice_base, g.step_base, g.count,"
         " g.buckets) s;")
        .IgnoreError();  // the file's JSON view answers instead
  }
  // Only where slices are chunked (a version-1 file has a real table).
  if (!HasMainTable(db, "slice_chunks")) return absl::OkStatus();
  std::string sql =
      "CREATE TEMP VIEW IF NOT EXISTS slices AS SELECT c.run_id, s.slice_id, c.track_id, s.start_ns, s.dur_ns,"
      " s.depth, s.parent_id, s.name_id, s.kind, c.step, c.graph_id, s.op_id, s.flow_id, s.bytes, s.arrival_ns,"
      " s.wait_ns, s.category_id, s.shape_id FROM main.slice_chunks c,"
      " shardscope_chunk_slices(c.chunk_id, c.start_ns, c.first_slice_id, c.count, c.slices) s";
  // Simulated runs' slices, made from their schedules (store/sim_timeline.h).
  absl::StrAppend(&sql, InstallSimSlices(db), ";");
  // The per-chip step breakdown from each chunk's sums (the same rows as the
  // schema's view over every slice; tests/store compares the two).
  absl::StrAppend(
      &sql,
      // The chunks are read once, the step's span taken over its chips by a
      // window: a `WHERE run_id = N` then reaches slice_chunks, and another
      // run's chunks (a damaged one too) are never decoded. (A CTE read twice
      // was made whole first, every run of the file.)
      "CREATE TEMP VIEW IF NOT EXISTS step_device_summary AS SELECT run_id, step, device_id, compute_ns,"
      " collective_ns, transfer_ns, max(0, (step_end_ns - step_start_ns) - busy_ns - host_wait_ns) AS idle_ns, busy_ns,"
      " step_end_ns - step_start_ns AS span_ns, step_start_ns, step_end_ns, host_wait_ns FROM ("
      " SELECT *, min(chip_start_ns) OVER w AS step_start_ns, max(chip_end_ns) OVER w AS step_end_ns FROM ("
      " SELECT c.run_id AS run_id, c.step AS step, t.device_id AS device_id, min(s.start_ns) AS chip_start_ns,"
      " max(s.end_ns) AS chip_end_ns, sum(s.compute_ns) AS compute_ns, sum(s.collective_ns) AS collective_ns,"
      " sum(s.transfer_ns) AS transfer_ns, sum(s.host_wait_ns) AS host_wait_ns, sum(s.busy_ns) AS busy_ns"
      " FROM main.slice_chunks c JOIN main.tracks t ON t.run_id = c.run_id AND t.track_id = c.track_id,"
      " shardscope_chunk_sums(c.chunk_id, c.start_ns, c.first_slice_id, c.count, c.slices) s"
      " WHERE t.clock = 'device' AND t.device_id IS NOT NULL AND c.step IS NOT NULL AND s.n0 > 0"
      " GROUP BY c.run_id, c.step, t.device_id)"
      " WINDOW w AS (PARTITION BY run_id, step));");
  // The other views over slices, made again in temp so that they read the
  // native view (a view in main always reads main's objects).
  const std::string schema = SchemaSql();
  for (const char* view : {"events", "kernel_stats", "time_by_source_line", "time_by_module_path"}) {
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
