// Write side of the store: a trace::Recorder sink that queues every record and
// writes it to SQLite from one background thread, in batched transactions, so
// instrumented hot paths never wait on disk. Install it with
// trace::SetRecorder(writer.get()) for the length of a run.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "profiler/trace/recorder.h"

namespace shardscope::store {

class Writer : public trace::Recorder {
 public:
  // Opens `path` for writing: creates it (WAL mode, schema v1, meta rows) when
  // missing or empty, or opens an existing shardscope database to append runs.
  // Refuses another tool's file, a non-SQLite file, or a newer schema, naming the file.
  static absl::StatusOr<std::unique_ptr<Writer>> Open(const std::string& path);
  // Writes what is queued, stops the thread and closes the file. Does not end
  // an open run: a run without EndRun stays 'running', as if the process died.
  ~Writer() override;
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Inserts the runs row (status 'running') and makes it the run that later
  // records belong to. Blocks until the row exists, so run_id() is set on return.
  void BeginRun(const trace::RunRecord& r) override;
  // Like BeginRun, but returns the new run's id or the error.
  absl::StatusOr<int64_t> StartRun(const trace::RunRecord& r);
  // The current run's id; 0 before BeginRun (or when BeginRun failed).
  int64_t run_id() const { return run_id_.load(); }

  void Record(const trace::HostRecord& r) override { Push(r); }
  void Record(const trace::DeviceRecord& r) override { Push(r); }
  void Record(const trace::MeshRecord& r) override { Push(r); }
  void Record(const trace::TrackRecord& r) override { Push(r); }
  void Record(const trace::SliceRecord& r) override { Push(r); }
  void Record(const trace::GraphRecord& r) override { Push(r); }
  void Record(const trace::OpRecord& r) override { Push(r); }
  void Record(const trace::MemoryPlanRecord& r) override { Push(r); }
  void Record(const trace::FusionRecord& r) override { Push(r); }
  void Record(const trace::PassRecord& r) override { Push(r); }
  void Record(const trace::ShardingRecord& r) override { Push(r); }
  void Record(const trace::AutoShardingRecord& r) override { Push(r); }
  void Record(const trace::CompilationRecord& r) override { Push(r); }
  void Record(const trace::ExecutionRecord& r) override { Push(r); }
  void Record(const trace::StepRecord& r) override { Push(r); }
  void Record(const trace::TensorRecord& r) override { Push(r); }
  void Record(const trace::ShardPlacementRecord& r) override { Push(r); }
  void Record(const trace::CounterRecord& r) override { Push(r); }

  // Blocks until everything recorded before the call is committed (visible to
  // readers, safe from a crash of this process).
  void Flush() override;
  // Marks the current run 'finished' with its end time, then flushes.
  void EndRun() override;
  // Flush()/EndRun() followed by status(): for callers that want the error.
  absl::Status FlushAndCheck();
  absl::Status EndRunAndCheck();

  // The first error the background writer hit (OK when none). Writing goes on
  // after an error; later errors are counted in the message, never abort.
  absl::Status status() const;
  // Rows written so far (all tables), for throughput reports.
  int64_t rows_written() const { return rows_written_.load(); }
  const std::string& path() const { return path_; }

 private:
  struct RunBegin { trace::RunRecord run; };
  struct RunEnd { int64_t ended_at_ns = 0; };
  using Item = std::variant<RunBegin, RunEnd, trace::HostRecord, trace::DeviceRecord,
                            trace::MeshRecord, trace::TrackRecord, trace::SliceRecord,
                            trace::GraphRecord, trace::OpRecord, trace::MemoryPlanRecord, trace::FusionRecord, trace::PassRecord, trace::ShardingRecord, trace::AutoShardingRecord, trace::CompilationRecord,
                            trace::ExecutionRecord, trace::StepRecord, trace::TensorRecord,
                            trace::ShardPlacementRecord, trace::CounterRecord>;
  class Db;  // the connection and prepared statements, used only by the thread

  explicit Writer(std::string path, std::unique_ptr<Db> db);
  // Queues one item; returns its sequence number (for waiting on it).
  uint64_t Push(Item item);
  void WaitWritten(uint64_t seq);
  void Loop();
  void SetError(absl::Status st);

  std::string path_;
  std::unique_ptr<Db> db_;

  mutable std::mutex mu_;
  std::condition_variable queued_cv_;   // the thread waits for work
  std::condition_variable written_cv_;  // Flush and full-queue producers wait
  std::vector<Item> queue_;
  uint64_t enqueued_ = 0;  // sequence number of the last queued item
  uint64_t written_ = 0;   // sequence number of the last committed item
  int waiters_ = 0;        // threads blocked in WaitWritten
  bool stop_ = false;
  absl::Status error_;
  int64_t error_count_ = 0;

  std::atomic<int64_t> run_id_{0};
  std::atomic<int64_t> rows_written_{0};
  std::thread thread_;
};

}  // namespace shardscope::store
