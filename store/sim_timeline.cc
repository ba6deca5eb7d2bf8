// Simulated runs in the store (see sim_timeline.h).
//
// Blob layouts (U: unsigned LEB128 varint, S: zigzag-coded signed varint):
//   sim_programs.schedule  U(1) U(ops) {U(name_id) U(kind) S(op_id) S(dur_ns) S(collective) S(coll_seq) S(bytes)}
//                          U(layouts) {U(groups) {U(members) {S(chip - previous chip)}}}
//                          U(collectives) {U(layout) U(len) algorithm-bytes U(groups)
//                            {S(dur_ns) U(links) {U(a) U(b - a) S(device - a) U(name_id) S(bytes) S(busy_ns)}}}
//                          U(name_id of "waiting for host")
//   sim_runs.transfers     U(n) {U(name_id) S(dur_ns) S(bytes)}
//   sim_runs.starts        U(chips) {S(start - previous start)}
//   sim_runs.preempted     U(chips) {U(ns)}
//   sim_runs.ends          U(collective ops) {U(groups) {S(end - previous end)}}
#include "store/sim_timeline.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/str_cat.h"
#include "store/json_text.h"
#include "store/sim_walk.h"
#include "store/sqlite_util.h"

namespace shardscope::store {
namespace {

using internal::Stmt;

// A sim_chips row no run writes: said with the chip and its values, never read as a healthy chip.
std::string DamagedChip(int64_t run_id, int64_t device, const trace::SimChip& c) {
  return absl::StrCat("sim_chips of run ", run_id, ", chip ", device, ": time_scale ", c.time_scale,
                      " and jitter ", c.jitter,
                      " are not what a run stores (a scale above 0 up to 1000, a jitter from 0 below 1):"
                      " the file is damaged");
}

class Enc {
 public:
  void U(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void S(int64_t v) { U((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
  void Bytes(const std::string& s) {
    U(s.size());
    out_ += s;
  }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

class Dec {
 public:
  Dec(const void* p, size_t n) : p_(static_cast<const uint8_t*>(p)), e_(p_ + n) {}
  uint64_t U() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= e_) {
        ok_ = false;
        return 0;
      }
      const uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ok_ = false;
    return v;
  }
  int64_t S() {
    const uint64_t u = U();
    return static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
  }
  // A count that cannot exceed what is left (each element takes a byte at least).
  size_t Count() {
    const uint64_t n = U();
    if (n > static_cast<uint64_t>(e_ - p_)) {
      ok_ = false;
      return 0;
    }
    return static_cast<size_t>(n);
  }
  std::string Bytes() {
    const size_t n = Count();
    if (!ok_) return "";
    std::string s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  bool ok() const { return ok_; }

 private:
  const uint8_t* p_;
  const uint8_t* e_;
  bool ok_ = true;
};

std::string EncodeProgram(const trace::SimProgram& p) {
  Enc e;
  e.U(1);
  e.U(p.ops.size());
  for (const trace::SimOp& op : p.ops) {
    e.U(static_cast<uint64_t>(op.name_id));
    e.U(static_cast<uint64_t>(op.kind));
    e.S(op.op_id);
    e.S(op.dur_ns);
    e.S(op.collective);
    e.S(op.coll_seq);
    e.S(op.bytes);
  }
  e.U(p.group_sets.size());
  for (const auto& set : p.group_sets) {
    e.U(set.size());
    for (const auto& g : set) {
      e.U(g.size());
      int prev = 0;
      for (int c : g) {
        e.S(c - prev);
        prev = c;
      }
    }
  }
  e.U(p.collectives.size());
  for (const trace::SimCollective& c : p.collectives) {
    e.U(static_cast<uint64_t>(c.group_set));
    e.Bytes(c.algorithm);
    e.U(c.group_dur_ns.size());
    for (size_t g = 0; g < c.group_dur_ns.size(); ++g) {
      e.S(c.group_dur_ns[g]);
      const auto& links = g < c.group_links.size() ? c.group_links[g] : std::vector<trace::SimLinkUse>{};
      e.U(links.size());
      for (const trace::SimLinkUse& u : links) {
        e.U(static_cast<uint64_t>(u.a));
        e.U(static_cast<uint64_t>(u.b - u.a));
        e.S(u.device - u.a);
        e.U(static_cast<uint64_t>(u.name_id));
        e.S(u.bytes);
        e.S(u.busy_ns);
      }
    }
  }
  e.U(static_cast<uint64_t>(p.preempted_name_id));
  return e.str();
}

absl::StatusOr<trace::SimProgram> DecodeProgram(const void* data, size_t size, int64_t graph_id) {
  trace::SimProgram p;
  p.graph_id = graph_id;
  Dec d(data, size);
  auto bad = [&] {
    return absl::DataLossError(absl::StrCat("sim_programs row of graph ", graph_id,
                                            " is damaged (run `shardscope check`)"));
  };
  if (d.U() != 1) return bad();
  p.ops.resize(d.Count());
  for (trace::SimOp& op : p.ops) {
    op.name_id = static_cast<int32_t>(d.U());
    op.kind = static_cast<trace::SliceKind>(std::min<uint64_t>(d.U(), 5));
    op.op_id = d.S();
    op.dur_ns = d.S();
    op.collective = static_cast<int>(d.S());
    op.coll_seq = static_cast<int>(d.S());
    op.bytes = d.S();
    if (op.coll_seq >= 0) p.num_collective_ops = std::max(p.num_collective_ops, op.coll_seq + 1);
  }
  p.group_sets.resize(d.Count());
  for (auto& set : p.group_sets) {
    set.resize(d.Count());
    for (auto& g : set) {
      g.resize(d.Count());
      int prev = 0;
      for (int& c : g) c = prev = prev + static_cast<int>(d.S());
    }
  }
  p.collectives.resize(d.Count());
  for (trace::SimCollective& c : p.collectives) {
    c.group_set = static_cast<int>(d.U());
    c.algorithm = d.Bytes();
    const size_t groups = d.Count();
    c.group_dur_ns.resize(groups);
    c.group_links.resize(groups);
    for (size_t g = 0; g < groups && d.ok(); ++g) {
      c.group_dur_ns[g] = d.S();
      c.group_links[g].resize(d.Count());
      for (trace::SimLinkUse& u : c.group_links[g]) {
        u.a = static_cast<int>(d.U());
        u.b = u.a + static_cast<int>(d.U());
        u.device = u.a + static_cast<int>(d.S());
        u.name_id = static_cast<int32_t>(d.U());
        u.bytes = d.S();
        u.busy_ns = d.S();
      }
    }
    if (c.group_set < 0 || c.group_set >= static_cast<int>(p.group_sets.size())) return bad();
  }
  p.preempted_name_id = static_cast<int32_t>(d.U());
  if (!d.ok()) return bad();
  for (const trace::SimOp& op : p.ops)
    if (op.collective >= static_cast<int>(p.collectives.size())) return bad();
  return p;
}

std::string EncodeTransfers(const std::vector<trace::SimOp>& t) {
  Enc e;
  e.U(t.size());
  for (const trace::SimOp& op : t) {
    e.U(static_cast<uint64_t>(op.name_id));
    e.S(op.dur_ns);
    e.S(op.bytes);
  }
  return e.str();
}

std::string EncodeDeltas(const std::vector<int64_t>& v) {
  Enc e;
  e.U(v.size());
  int64_t prev = 0;
  for (int64_t x : v) {
    e.S(x - prev);
    prev = x;
  }
  return e.str();
}

std::string EncodeEnds(const std::vector<std::vector<int64_t>>& ends) {
  Enc e;
  e.U(ends.size());
  int64_t prev = 0;
  for (const auto& groups : ends) {
    e.U(groups.size());
    for (int64_t x : groups) {
      e.S(x - prev);
      prev = x;
    }
  }
  return e.str();
}

// A program run from its sim_runs row (the blobs); false when damaged.
bool DecodeRun(int64_t seq, int step, int64_t graph_id, const void* transfers, size_t tn, const void* starts,
               size_t sn, const void* preempted, size_t pn, const void* ends, size_t en, trace::SimRun* r) {
  r->seq = seq;
  r->step = step;
  r->graph_id = graph_id;
  Dec t(transfers, tn);
  r->transfers.resize(t.Count());
  for (trace::SimOp& op : r->transfers) {
    op.kind = trace::SliceKind::kTransfer;
    op.name_id = static_cast<int32_t>(t.U());
    op.dur_ns = t.S();
    op.bytes = t.S();
  }
  Dec s(starts, sn);
  r->start_ns.resize(s.Count());
  int64_t prev = 0;
  for (int64_t& x : r->start_ns) x = prev = prev + s.S();
  r->preempted_ns.clear();
  bool ok = t.ok() && s.ok();
  if (preempted && pn > 0) {
    Dec p(preempted, pn);
    r->preempted_ns.resize(p.Count());
    for (int64_t& x : r->preempted_ns) x = static_cast<int64_t>(p.U());
    ok = ok && p.ok() && r->preempted_ns.size() == r->start_ns.size();
  }
  Dec e(ends, en);
  r->collective_end_ns.resize(e.Count());
  prev = 0;
  for (auto& groups : r->collective_end_ns) {
    groups.resize(e.Count());
    for (int64_t& x : groups) x = prev = prev + e.S();
  }
  return ok && e.ok();
}

absl::Status Check(int rc, sqlite3* db, const std::string& what) {
  if (rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW) return absl::OkStatus();
  return internal::SqliteStatus(rc, absl::StrCat(what, ": ", internal::DbError(db)));
}

}  // namespace

absl::Status WriteSimTimeline(const std::string& path, const SimTimelineInput& in) {
  if (!in.programs || !in.chips || !in.track_ids || !in.runs)
    return absl::InvalidArgumentError("WriteSimTimeline: programs, chips, tracks and runs are required");
  if (in.chips->size() != in.track_ids->size())
    return absl::InvalidArgumentError(
        absl::StrCat("WriteSimTimeline: ", in.chips->size(), " chips but ", in.track_ids->size(), " tracks"));
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE, nullptr);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> db(raw, sqlite3_close);
  if (rc != SQLITE_OK) return Check(rc, raw, absl::StrCat("opening ", path, " to store the simulated timeline"));
  sqlite3_busy_timeout(db.get(), 30000);
  auto fail = [&](absl::Status s) {
    internal::Exec(db.get(), "ROLLBACK").IgnoreError();
    return absl::Status(s.code(), absl::StrCat("storing the simulated timeline in ", path, ": ", s.message()));
  };
  if (absl::Status s = internal::Exec(db.get(), "BEGIN IMMEDIATE"); !s.ok()) return fail(s);
  Stmt add_name, find_name, add_prog, add_chip, add_run, add_bounds;
  for (auto [stmt, sql] : std::initializer_list<std::pair<Stmt*, const char*>>{
           {&add_name, "INSERT OR IGNORE INTO names(name) VALUES (?1)"},
           {&find_name, "SELECT name_id FROM names WHERE name = ?1"},
           {&add_prog,
            "INSERT OR REPLACE INTO sim_programs(run_id, graph_id, ops, collectives, algorithms, schedule)"
            " VALUES (?1, ?2, ?3, ?4, ?5, ?6)"},
           {&add_chip,
            "INSERT OR REPLACE INTO sim_chips(run_id, device_id, track_id, time_scale, jitter, seed)"
            " VALUES (?1, ?2, ?3, ?4, ?5, ?6)"},
           {&add_run,
            "INSERT OR REPLACE INTO sim_runs(run_id, seq, step, graph_id, transfers, starts, preempted, ends)"
            " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"},
           {&add_bounds,
            "INSERT INTO step_bounds(run_id, step, clock, start_ns, end_ns) VALUES (?1, ?2, 'modeled', ?3, ?4)"
            " ON CONFLICT(run_id, clock, step) DO UPDATE SET start_ns = min(start_ns, excluded.start_ns),"
            " end_ns = max(end_ns, excluded.end_ns)"}})
    if (absl::Status s = stmt->Prepare(db.get(), sql); !s.ok()) return fail(s);
  std::map<std::string, int32_t> names;
  auto intern = [&](const std::string& name) -> absl::StatusOr<int32_t> {
    if (auto it = names.find(name); it != names.end()) return it->second;
    add_name.Text(1, name);
    if (absl::Status s = add_name.Run(); !s.ok()) return s;
    find_name.Text(1, name);
    int rc = sqlite3_step(find_name.get());
    if (rc != SQLITE_ROW) {
      sqlite3_reset(find_name.get());
      return Check(rc == SQLITE_DONE ? SQLITE_ERROR : rc, db.get(), "interning a name");
    }
    const int32_t id = static_cast<int32_t>(sqlite3_column_int64(find_name.get(), 0));
    sqlite3_reset(find_name.get());
    names[name] = id;
    return id;
  };
  auto blob = [](Stmt& s, int i, const std::string& b) {
    sqlite3_bind_blob(s.get(), i, b.data(), static_cast<int>(b.size()), SQLITE_TRANSIENT);
  };
  auto preempted = intern("waiting for host");
  if (!preempted.ok()) return fail(preempted.status());
  for (const auto& [graph_id, program] : *in.programs) {
    if (in.stored_programs && in.stored_programs->count(graph_id)) continue;
    trace::SimProgram p = program;
    p.preempted_name_id = *preempted;
    for (trace::SimOp& op : p.ops) {
      auto id = intern(op.name);
      if (!id.ok()) return fail(id.status());
      op.name_id = *id;
    }
    nlohmann::json algorithms = nlohmann::json::object();
    for (const trace::SimOp& op : p.ops)
      if (op.collective >= 0) {
        const std::string& a = p.collectives[op.collective].algorithm;
        algorithms[a] = algorithms.value(a, 0) + 1;
      }
    for (trace::SimCollective& c : p.collectives)
      for (auto& links : c.group_links)
        for (trace::SimLinkUse& u : links) {
          auto id = intern(absl::StrCat("link ", u.a, "-", u.b));
          if (!id.ok()) return fail(id.status());
          u.name_id = *id;
        }
    add_prog.Int(1, in.run_id);
    add_prog.Int(2, graph_id);
    add_prog.Int(3, static_cast<int64_t>(p.ops.size()));
    add_prog.Int(4, p.num_collective_ops);
    add_prog.Text(5, JsonText(algorithms));
    blob(add_prog, 6, EncodeProgram(p));
    if (absl::Status s = add_prog.Run(); !s.ok()) return fail(s);
  }
  for (size_t c = 0; in.write_chips && c < in.chips->size(); ++c) {
    const trace::SimChip& chip = (*in.chips)[c];
    add_chip.Int(1, in.run_id);
    add_chip.Int(2, static_cast<int64_t>(c));
    add_chip.Int(3, (*in.track_ids)[c]);
    add_chip.Real(4, chip.time_scale);
    add_chip.Real(5, chip.jitter);
    add_chip.Int(6, static_cast<int64_t>(chip.seed));
    if (absl::Status s = add_chip.Run(); !s.ok()) return fail(s);
  }
  std::map<int, std::pair<int64_t, int64_t>> bounds;
  for (size_t k = in.first_run; k < in.runs->size(); ++k) {
    const trace::SimRun& r = (*in.runs)[k];
    std::vector<trace::SimOp> transfers = r.transfers;
    for (trace::SimOp& op : transfers) {
      auto id = intern(op.name);
      if (!id.ok()) return fail(id.status());
      op.name_id = *id;
    }
    add_run.Int(1, in.run_id);
    add_run.Int(2, r.seq);
    add_run.Int(3, r.step);
    add_run.Int(4, r.graph_id);
    blob(add_run, 5, EncodeTransfers(transfers));
    blob(add_run, 6, EncodeDeltas(r.start_ns));
    bool preempted = false;
    for (int64_t p : r.preempted_ns) preempted |= p > 0;
    if (preempted) {
      Enc e;
      e.U(r.preempted_ns.size());
      for (int64_t p : r.preempted_ns) e.U(static_cast<uint64_t>(std::max<int64_t>(p, 0)));
      blob(add_run, 7, e.str());
    } else {
      add_run.Null(7);
    }
    blob(add_run, 8, EncodeEnds(r.collective_end_ns));
    if (absl::Status s = add_run.Run(); !s.ok()) return fail(s);
    for (size_t c = 0; c < r.start_ns.size(); ++c) {
      const int64_t s = r.start_ns[c] - (r.preempted_ns.empty() ? 0 : r.preempted_ns[c]);
      const int64_t e = c < r.end_ns.size() ? r.end_ns[c] : r.start_ns[c];
      auto [it, added] = bounds.emplace(r.step, std::make_pair(s, e));
      if (!added) it->second = {std::min(it->second.first, s), std::max(it->second.second, e)};
    }
  }
  for (const auto& [step, se] : bounds) {
    add_bounds.Int(1, in.run_id);
    add_bounds.Int(2, step);
    add_bounds.Int(3, se.first);
    add_bounds.Int(4, se.second);
    if (absl::Status s = add_bounds.Run(); !s.ok()) return fail(s);
  }
  if (absl::Status s = internal::Exec(db.get(), "COMMIT"); !s.ok()) return fail(s);
  if (in.stored_programs)
    for (const auto& [graph_id, program] : *in.programs) in.stored_programs->insert(graph_id);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// The table-valued function shardscope_sim_slices.

namespace {

enum Column {
  kSliceId, kTrackId, kStart, kDur, kDepth, kParent, kNameId, kKind, kOpId, kFlowId, kBytes, kArrival, kWait,
  kCategory, kArgRun, kArgSeq, kArgStep, kArgGraph, kArgTransfers, kArgStarts, kArgPreempted, kArgEnds, kArgChip,
  kNumColumns
};
constexpr int kFirstArg = kArgRun, kNumArgs = kNumColumns - kArgRun;

// What one connection has decoded: programs and chips per run (a stored run never changes).
struct Cache {
  std::mutex mu;
  std::map<std::pair<int64_t, int64_t>, std::shared_ptr<const trace::SimProgram>> programs;
  struct Chips {
    std::vector<trace::SimChip> chips;
    std::vector<int64_t> tracks;
    std::map<int64_t, int> chip_of_track;
  };
  std::map<int64_t, std::shared_ptr<const Chips>> chips;
  // Program runs decoded lately (a query reads every chip of a run in turn).
  std::map<std::pair<int64_t, int64_t>, std::shared_ptr<const trace::SimRun>> runs;
};
constexpr size_t kCachedRuns = 64;

struct Vtab {
  sqlite3_vtab base;
  sqlite3* db = nullptr;
  Cache* cache = nullptr;
};

struct Row {
  int64_t track_id;
  trace::SimSlice s;
};

struct Cursor {
  sqlite3_vtab_cursor base;
  std::vector<Row> rows;
  size_t i = 0;
};

std::shared_ptr<const Cache::Chips> LoadChips(Vtab* v, int64_t run_id, std::string* err) {
  {
    std::lock_guard<std::mutex> l(v->cache->mu);
    if (auto it = v->cache->chips.find(run_id); it != v->cache->chips.end()) return it->second;
  }
  auto out = std::make_shared<Cache::Chips>();
  sqlite3_stmt* q = nullptr;
  if (sqlite3_prepare_v2(v->db,
                         "SELECT device_id, track_id, time_scale, jitter, seed FROM main.sim_chips WHERE run_id = ?1"
                         " ORDER BY device_id",
                         -1, &q, nullptr) != SQLITE_OK) {
    *err = internal::DbError(v->db);
    return nullptr;
  }
  sqlite3_bind_int64(q, 1, run_id);
  while (sqlite3_step(q) == SQLITE_ROW) {
    const int64_t device = sqlite3_column_int64(q, 0);
    if (device != static_cast<int64_t>(out->chips.size())) {
      *err = absl::StrCat("sim_chips of run ", run_id, " miss chip ", out->chips.size());
      sqlite3_finalize(q);
      return nullptr;
    }
    trace::SimChip c;
    c.time_scale = sqlite3_column_double(q, 2);
    c.jitter = sqlite3_column_double(q, 3);
    c.seed = static_cast<uint64_t>(sqlite3_column_int64(q, 4));
    if (!c.Valid()) {
      *err = DamagedChip(run_id, device, c);
      sqlite3_finalize(q);
      return nullptr;
    }
    out->chips.push_back(c);
    out->tracks.push_back(sqlite3_column_int64(q, 1));
    out->chip_of_track[out->tracks.back()] = static_cast<int>(device);
  }
  sqlite3_finalize(q);
  std::lock_guard<std::mutex> l(v->cache->mu);
  return v->cache->chips[run_id] = out;
}

std::shared_ptr<const trace::SimProgram> LoadProgram(Vtab* v, int64_t run_id, int64_t graph_id, int chips,
                                                     std::string* err) {
  {
    std::lock_guard<std::mutex> l(v->cache->mu);
    if (auto it = v->cache->programs.find({run_id, graph_id}); it != v->cache->programs.end()) return it->second;
  }
  sqlite3_stmt* q = nullptr;
  if (sqlite3_prepare_v2(v->db, "SELECT schedule FROM main.sim_programs WHERE run_id = ?1 AND graph_id = ?2", -1, &q,
                         nullptr) != SQLITE_OK) {
    *err = internal::DbError(v->db);
    return nullptr;
  }
  sqlite3_bind_int64(q, 1, run_id);
  sqlite3_bind_int64(q, 2, graph_id);
  std::shared_ptr<trace::SimProgram> out;
  if (sqlite3_step(q) == SQLITE_ROW) {
    auto p = DecodeProgram(sqlite3_column_blob(q, 0), static_cast<size_t>(sqlite3_column_bytes(q, 0)), graph_id);
    if (!p.ok()) *err = std::string(p.status().message());
    else out = std::make_shared<trace::SimProgram>(*std::move(p));
  } else {
    *err = absl::StrCat("run ", run_id, " has no sim_programs row for graph ", graph_id);
  }
  sqlite3_finalize(q);
  if (!out) return nullptr;
  out->BuildIndex(chips);
  std::lock_guard<std::mutex> l(v->cache->mu);
  return v->cache->programs[{run_id, graph_id}] = out;
}

int Connect(sqlite3* db, void* aux, int, const char* const*, sqlite3_vtab** out, char**) {
  int rc = sqlite3_declare_vtab(
      db,
      "CREATE TABLE x(slice_id, track_id, start_ns, dur_ns, depth, parent_id, name_id, kind, op_id, flow_id, bytes,"
      " arrival_ns, wait_ns, category_id, run_id HIDDEN, seq HIDDEN, step HIDDEN, graph_id HIDDEN,"
      " transfers HIDDEN, starts HIDDEN, preempted HIDDEN, ends HIDDEN, chip HIDDEN)");
  if (rc != SQLITE_OK) return rc;
  auto* v = new (std::nothrow) Vtab();
  if (!v) return SQLITE_NOMEM;
  std::memset(&v->base, 0, sizeof v->base);
  v->db = db;
  v->cache = static_cast<Cache*>(aux);
  *out = &v->base;
  return SQLITE_OK;
}

int Disconnect(sqlite3_vtab* vtab) {
  delete reinterpret_cast<Vtab*>(vtab);
  return SQLITE_OK;
}

// Every argument is required (the views give them): one chip of one program run.
int BestIndex(sqlite3_vtab*, sqlite3_index_info* info) {
  int have = 0;
  for (int c = 0; c < info->nConstraint; ++c) {
    const auto& k = info->aConstraint[c];
    if (k.op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
    if (k.iColumn < kFirstArg) continue;
    if (!k.usable) return SQLITE_CONSTRAINT;
    info->aConstraintUsage[c].argvIndex = k.iColumn - kFirstArg + 1;
    info->aConstraintUsage[c].omit = 1;
    have |= 1 << (k.iColumn - kFirstArg);
  }
  if (have != (1 << kNumArgs) - 1) return SQLITE_CONSTRAINT;
  info->estimatedCost = 100;
  info->estimatedRows = 500;
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

int Error(sqlite3_vtab_cursor* cur, const std::string& msg, int rc = SQLITE_CORRUPT) {
  sqlite3_free(cur->pVtab->zErrMsg);
  cur->pVtab->zErrMsg = sqlite3_mprintf("%s", msg.c_str());
  return rc;
}

std::shared_ptr<const trace::SimRun> LoadRun(Vtab* v, int64_t run_id, sqlite3_value** argv) {
  const int64_t seq = sqlite3_value_int64(argv[1]);
  {
    std::lock_guard<std::mutex> l(v->cache->mu);
    if (auto it = v->cache->runs.find({run_id, seq}); it != v->cache->runs.end()) return it->second;
  }
  auto run = std::make_shared<trace::SimRun>();
  auto data = [&](int k) { return sqlite3_value_blob(argv[k]); };
  auto size = [&](int k) { return static_cast<size_t>(sqlite3_value_bytes(argv[k])); };
  if (!DecodeRun(seq, static_cast<int>(sqlite3_value_int64(argv[2])), sqlite3_value_int64(argv[3]), data(4), size(4),
                 data(5), size(5), data(6), size(6), data(7), size(7), run.get()))
    return nullptr;
  std::lock_guard<std::mutex> l(v->cache->mu);
  if (v->cache->runs.size() >= kCachedRuns) v->cache->runs.erase(v->cache->runs.begin());
  return v->cache->runs[{run_id, seq}] = run;
}

int Filter(sqlite3_vtab_cursor* cur, int, const char*, int argc, sqlite3_value** argv) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  auto* v = reinterpret_cast<Vtab*>(cur->pVtab);
  c->rows.clear();
  c->i = 0;
  if (argc != kNumArgs) return SQLITE_ERROR;
  const int64_t run_id = sqlite3_value_int64(argv[0]);
  std::string err;
  auto chips = LoadChips(v, run_id, &err);
  if (!chips) return Error(cur, err);
  const int n = static_cast<int>(chips->chips.size());
  auto program = LoadProgram(v, run_id, sqlite3_value_int64(argv[3]), n, &err);
  if (!program) return Error(cur, err);
  auto run = LoadRun(v, run_id, argv);
  const int64_t seq = sqlite3_value_int64(argv[1]);
  auto damaged = [&] {
    return Error(cur, absl::StrCat("sim_runs row ", seq, " of run ", run_id,
                                   " is damaged or does not match its program (run `shardscope check`)"));
  };
  if (!run || static_cast<int>(run->start_ns.size()) != n ||
      static_cast<int>(run->collective_end_ns.size()) != program->num_collective_ops)
    return damaged();
  for (const trace::SimOp& op : program->ops)
    if (op.coll_seq >= 0 &&
        run->collective_end_ns[op.coll_seq].size() !=
            program->group_sets[program->collectives[op.collective].group_set].size())
      return damaged();
  const int64_t chip = sqlite3_value_int64(argv[8]);
  if (chip < 0 || chip >= n) return SQLITE_OK;
  std::vector<trace::SimSlice> slices;
  trace::SimChipSlices(run_id, *program, chips->chips[chip], *run, static_cast<int>(chip), &slices);
  for (const trace::SimSlice& s : slices) c->rows.push_back({chips->tracks[chip], s});
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

const char* KindName(trace::SliceKind k) {
  switch (k) {
    case trace::SliceKind::kCompute: return "compute";
    case trace::SliceKind::kCollective: return "collective";
    case trace::SliceKind::kTransfer: return "transfer";
    case trace::SliceKind::kHost: return "host";
    case trace::SliceKind::kCompile: return "compile";
    case trace::SliceKind::kHostWait: return "host_wait";
  }
  return "compute";
}

int ColumnValue(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
  const Row& r = reinterpret_cast<Cursor*>(cur)->rows[reinterpret_cast<Cursor*>(cur)->i];
  const trace::SimSlice& s = r.s;
  auto int_or_null = [&](int64_t v, bool present) {
    present ? sqlite3_result_int64(ctx, v) : sqlite3_result_null(ctx);
  };
  switch (col) {
    case kSliceId: sqlite3_result_int64(ctx, s.slice_id); break;
    case kTrackId: sqlite3_result_int64(ctx, r.track_id); break;
    case kStart: sqlite3_result_int64(ctx, s.start_ns); break;
    case kDur: sqlite3_result_int64(ctx, s.dur_ns); break;
    case kDepth: sqlite3_result_int64(ctx, s.depth); break;
    case kParent: int_or_null(s.parent_id, s.parent_id >= 0); break;
    case kNameId: sqlite3_result_int64(ctx, s.name_id); break;
    case kKind: sqlite3_result_text(ctx, KindName(s.kind), -1, SQLITE_STATIC); break;
    case kOpId: int_or_null(s.op_id, s.op_id >= 0); break;
    case kFlowId: int_or_null(s.flow_id, s.flow_id >= 0); break;
    case kBytes: sqlite3_result_int64(ctx, s.bytes); break;
    case kArrival: int_or_null(s.arrival_ns, s.arrival_ns >= 0); break;
    case kWait: int_or_null(s.start_ns - s.arrival_ns, s.arrival_ns >= 0); break;
    case kCategory: sqlite3_result_null(ctx); break;
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

}  // namespace

namespace internal {

std::string InstallSimSlices(sqlite3* db) {
  auto* cache = new Cache();
  if (sqlite3_create_module_v2(db, "shardscope_sim_slices", &kModule, cache,
                               [](void* p) { delete static_cast<Cache*>(p); }) != SQLITE_OK)
    return "";
  sqlite3_stmt* q = nullptr;
  bool have = false;
  if (sqlite3_prepare_v2(db, "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = 'sim_runs'", -1, &q,
                         nullptr) == SQLITE_OK)
    have = sqlite3_step(q) == SQLITE_ROW;
  sqlite3_finalize(q);
  if (!have) return "";
  // One chip of one program run per call: a query that names tracks (track_id
  // = ?, IN (...)) makes only those chips' slices, through sim_chips' index.
  return " UNION ALL SELECT r.run_id, s.slice_id, c.track_id, s.start_ns, s.dur_ns, s.depth, s.parent_id,"
         " s.name_id, s.kind, r.step, r.graph_id, s.op_id, s.flow_id, s.bytes, s.arrival_ns, s.wait_ns, s.category_id,"
         " NULL FROM main.sim_runs r JOIN main.sim_chips c ON c.run_id = r.run_id,"
         " shardscope_sim_slices(r.run_id, r.seq, r.step, r.graph_id, r.transfers, r.starts, r.preempted, r.ends,"
         " c.device_id) s";
}

}  // namespace internal

// ---------------------------------------------------------------------------

absl::StatusOr<bool> SimTimelineReader::IsSimulated(int64_t run_id) const {
  auto has = reader_.HasTable("sim_runs");
  if (!has.ok() || !*has) return has;
  auto q = reader_.Query("SELECT 1 FROM sim_runs WHERE run_id = ?1 LIMIT 1", {std::to_string(run_id)});
  if (!q.ok()) return q.status();
  return !q->rows.empty();
}

absl::StatusOr<std::vector<TimelineSlice>> SimTimelineReader::Slices(int64_t run_id, int64_t track_id, int64_t t0,
                                                                     int64_t t1, size_t max_slices,
                                                                     bool* truncated) const {
  if (truncated) *truncated = false;
  std::vector<TimelineSlice> out;
  // The program runs whose bounds (step_bounds, modeled) overlap the window,
  // read column by column (a 512-chip pod's export read every chip's slices
  // as text and parsed them back: most of its time).
  sqlite3* db = reader_.connection();
  Stmt q;
  if (absl::Status st = q.Prepare(
          db,
          "SELECT s.slice_id, s.start_ns, s.dur_ns, s.depth, s.parent_id, s.name_id, s.kind, r.step, r.graph_id,"
          " s.op_id, s.flow_id, s.bytes, s.arrival_ns"
          " FROM sim_chips c JOIN sim_runs r ON r.run_id = c.run_id"
          " JOIN step_bounds b ON b.run_id = r.run_id AND b.step = r.step AND b.clock = 'modeled',"
          " shardscope_sim_slices(r.run_id, r.seq, r.step, r.graph_id, r.transfers, r.starts, r.preempted, r.ends,"
          " c.device_id) s"
          " WHERE c.run_id = ?1 AND c.track_id = ?2 AND b.end_ns > ?3 AND b.start_ns < ?4"
          " AND s.start_ns < ?4 AND s.start_ns + s.dur_ns > ?3");
      !st.ok())
    return st;
  q.Int(1, run_id);
  q.Int(2, track_id);
  q.Int(3, t0);
  q.Int(4, t1);
  auto or_none = [](sqlite3_stmt* st, int col) {
    return sqlite3_column_type(st, col) == SQLITE_NULL ? int64_t{-1} : sqlite3_column_int64(st, col);
  };
  int rc;
  while ((rc = sqlite3_step(q.get())) == SQLITE_ROW) {
    sqlite3_stmt* row = q.get();
    TimelineSlice s;
    s.slice_id = sqlite3_column_int64(row, 0);
    s.start_ns = sqlite3_column_int64(row, 1);
    s.dur_ns = sqlite3_column_int64(row, 2);
    s.depth = static_cast<int16_t>(sqlite3_column_int64(row, 3));
    s.parent_id = or_none(row, 4);
    s.name_id = static_cast<int32_t>(sqlite3_column_int64(row, 5));
    const std::string_view kind = internal::ColumnView(row, 6);
    for (int k = 0; k < kNumTimelineKinds; ++k)
      if (kind == TimelineKindName(static_cast<TimelineKind>(k))) s.kind = static_cast<TimelineKind>(k);
    s.step = static_cast<int32_t>(or_none(row, 7));
    s.graph_id = or_none(row, 8);
    s.op_id = or_none(row, 9);
    s.flow_id = or_none(row, 10);
    s.bytes = sqlite3_column_int64(row, 11);
    s.arrival_ns = or_none(row, 12);
    out.push_back(s);
  }
  if (rc != SQLITE_DONE)
    return absl::DataLossError(absl::StrCat(reader_.path(), ": reading the simulated timeline: ", internal::DbError(db),
                                            "; run `shardscope check ", reader_.path(), "` for details"));
  std::sort(out.begin(), out.end(), [](const TimelineSlice& a, const TimelineSlice& b) {
    return std::tie(a.depth, a.start_ns, a.slice_id) < std::tie(b.depth, b.start_ns, b.slice_id);
  });
  if (max_slices > 0 && out.size() > max_slices) {
    out.resize(max_slices);
    if (truncated) *truncated = true;
  }
  return out;
}

absl::Status SimTimelineReader::ForEachSlice(int64_t run_id, const std::function<void(const Row&)>& fn) const {
  Row row;
  return ForEachSimChipRun(reader_, run_id, {}, [&](const SimChipRun& r) {
    row.device_id = r.device_id;
    row.step = r.step;
    row.graph_id = r.graph_id;
    for (const trace::SimSlice& s : *r.slices) {
      row.slice = s;
      row.name = r.names->Of(s.name_id);
      fn(row);
    }
  });
}

const std::string SimNames::kUnnamed;

SimNames::SimNames(std::map<int32_t, std::string> names) : names_(std::move(names)) {
  if (!names_.empty() && names_.begin()->first >= 0 &&
      names_.rbegin()->first < static_cast<int32_t>(4 * names_.size() + 1024)) {
    by_id_.assign(static_cast<size_t>(names_.rbegin()->first) + 1, &kUnnamed);
    for (const auto& [id, name] : names_) by_id_[static_cast<size_t>(id)] = &name;
  }
}

absl::Status ForEachSimChipRun(const Reader& reader, int64_t run_id, const SimWalkFilter& filter,
                               const std::function<void(const SimChipRun&)>& fn) {
  sqlite3* db = reader.connection();
  const std::string run = std::to_string(run_id);
  auto chips = reader.Query(
      "SELECT device_id, time_scale, jitter, seed FROM sim_chips WHERE run_id = ?1 ORDER BY device_id",
      {run});
  if (!chips.ok()) return chips.status();
  std::vector<trace::SimChip> chip(chips->rows.size());
  for (size_t i = 0; i < chips->rows.size(); ++i) {
    if (chips->Int(i, "device_id") != static_cast<int64_t>(i))
      return absl::DataLossError(absl::StrCat("sim_chips of run ", run_id, " miss chip ", i));
    chip[i] = {chips->Real(i, "time_scale"), chips->Real(i, "jitter"), static_cast<uint64_t>(chips->Int(i, "seed"))};
    if (!chip[i].Valid()) return absl::DataLossError(DamagedChip(run_id, static_cast<int64_t>(i), chip[i]));
  }
  const int n = static_cast<int>(chip.size());
  std::map<int32_t, std::string> name_rows;
  {
    auto q = reader.Query("SELECT name_id, name FROM names");
    if (!q.ok()) return q.status();
    for (size_t i = 0; i < q->rows.size(); ++i)
      name_rows[static_cast<int32_t>(q->Int(i, "name_id"))] = q->Text(i, "name");
  }
  const SimNames names(std::move(name_rows));
  std::map<int64_t, trace::SimProgram> programs;
  auto load = [&](int64_t graph_id) -> absl::StatusOr<const trace::SimProgram*> {
    if (auto it = programs.find(graph_id); it != programs.end()) return &it->second;
    sqlite3_stmt* q = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT schedule FROM sim_programs WHERE run_id = ?1 AND graph_id = ?2", -1, &q,
                           nullptr) != SQLITE_OK)
      return absl::InternalError(internal::DbError(db));
    sqlite3_bind_int64(q, 1, run_id);
    sqlite3_bind_int64(q, 2, graph_id);
    absl::StatusOr<trace::SimProgram> p =
        absl::NotFoundError(absl::StrCat("run ", run_id, " has no sim_programs row for graph ", graph_id));
    if (sqlite3_step(q) == SQLITE_ROW)
      p = DecodeProgram(sqlite3_column_blob(q, 0), static_cast<size_t>(sqlite3_column_bytes(q, 0)), graph_id);
    sqlite3_finalize(q);
    if (!p.ok()) return p.status();
    p->BuildIndex(n);
    return &(programs[graph_id] = *std::move(p));
  };
  sqlite3_stmt* q = nullptr;
  if (sqlite3_prepare_v2(db,
                         "SELECT seq, step, graph_id, transfers, starts, preempted, ends FROM sim_runs WHERE run_id = ?1"
                         " ORDER BY seq",
                         -1, &q, nullptr) != SQLITE_OK)
    return absl::InternalError(internal::DbError(db));
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> owned(q, sqlite3_finalize);
  sqlite3_bind_int64(q, 1, run_id);
  std::vector<trace::SimSlice> slices;
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    // A step not wanted is neither decoded nor made.
    if (filter.want_step && !filter.want_step(static_cast<int>(sqlite3_column_int64(q, 1)))) continue;
    const int64_t graph_id = sqlite3_column_int64(q, 2);
    auto program = load(graph_id);
    if (!program.ok()) return program.status();
    trace::SimRun r;
    auto blob = [&](int k) { return sqlite3_column_blob(q, k); };
    auto size = [&](int k) { return static_cast<size_t>(sqlite3_column_bytes(q, k)); };
    if (!DecodeRun(sqlite3_column_int64(q, 0), static_cast<int>(sqlite3_column_int64(q, 1)), graph_id, blob(3),
                   size(3), blob(4), size(4), blob(5), size(5), blob(6), size(6), &r) ||
        static_cast<int>(r.start_ns.size()) != n ||
        static_cast<int>(r.collective_end_ns.size()) != (*program)->num_collective_ops)
      return absl::DataLossError(absl::StrCat("sim_runs row ", r.seq, " of run ", run_id,
                                              " is damaged or does not match its program (run `shardscope check`)"));
    SimChipRun cr;
    cr.step = r.step;
    cr.graph_id = graph_id;
    cr.slices = &slices;
    cr.names = &names;
    cr.program = *program;
    for (int c = 0; c < n; ++c) {
      slices.clear();
      trace::SimChipSlices(run_id, **program, chip[c], r, c, &slices);
      if (filter.top_level_only)
        slices.erase(std::remove_if(slices.begin(), slices.end(),
                                    [](const trace::SimSlice& s) { return s.depth > 0; }),
                     slices.end());
      cr.device_id = c;
      fn(cr);
    }
  }
  if (rc != SQLITE_DONE) return absl::InternalError(internal::DbError(db));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SummaryBucket>> SimTimelineReader::Summaries(int64_t run_id, int64_t track_id, int level,
                                                                        int64_t t0, int64_t t1) const {
  if (level < 0 || level >= kNumSummaryLevels)
    return absl::InvalidArgumentError(absl::StrCat("summary level ", level, " is not 0..", kNumSummaryLevels - 1));
  const int64_t width = SummaryWidthNs(level);
  const int64_t b0 = t0 / width * width;
  auto slices = Slices(run_id, track_id, b0, t1);
  if (!slices.ok()) return slices.status();
  std::map<std::pair<int16_t, int64_t>, SummaryBucket> buckets;
  for (const TimelineSlice& s : *slices) {
    if (s.start_ns < b0 || s.start_ns >= t1) continue;  // counted where it starts
    const int64_t start = s.start_ns / width * width;
    SummaryBucket& b = buckets[{s.depth, start}];
    if (b.count == 0) {
      b.start_ns = start;
      b.width_ns = width;
      b.depth = s.depth;
    }
    ++b.count;
    b.busy_ns += s.dur_ns;
    b.kind_ns[static_cast<int>(s.kind)] += s.dur_ns;
    if (s.dur_ns > b.longest_dur_ns || b.count == 1) {
      b.longest_slice_id = s.slice_id;
      b.longest_start_ns = s.start_ns;
      b.longest_dur_ns = s.dur_ns;
      b.longest_name_id = s.name_id;
      b.longest_kind = s.kind;
    }
    if (s.step >= 0) {
      b.first_step = b.first_step < 0 ? s.step : std::min(b.first_step, s.step);
      b.last_step = std::max(b.last_step, s.step);
    }
  }
  std::vector<SummaryBucket> out;
  for (auto& [key, b] : buckets) out.push_back(b);
  return out;
}

}  // namespace shardscope::store
