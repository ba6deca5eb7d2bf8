// Write side of the store: a trace::Recorder sink that queues every record and
// writes it to SQLite from one background thread, in batched transactions, so
// instrumented hot paths never wait on disk. Install it with
// trace::SetRecorder(writer.get()) for the length of a run.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
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

// How the writer deals with other processes and with failure (the defaults suit a run).
struct WriterOptions {
  // How long one attempt at a batch waits for another process's write lock.
  int busy_timeout_ms = 5000;
  // Attempts per batch while the file stays locked (SQLITE_BUSY/LOCKED), with a
  // short pause between; after the last, the batch's records count as lost.
  int batch_attempts = 3;
  // 0: no cap. Else the file stops growing at about this size and writes fail as
  // on a full disk (SQLITE_FULL), e.g. to bound a long run's database.
  int64_t max_file_bytes = 0;
  // How often the writer's thread says in run_writers.heartbeat_ns that it is alive.
  int heartbeat_ms = 5000;
  // Timeline capture limits (`shardscope run --trace-ring N`, `--trace-max-mb N`).
  // ring_steps > 0: when step S ends, the timeline of steps up to S - ring_steps
  // is deleted (chunks, their level-of-detail buckets, step bounds).
  int ring_steps = 0;
  // > 0: once the file passes this size, slices and counters are no longer
  // recorded (everything else is); runs.capture_note says from which step.
  int64_t max_capture_bytes = 0;
  // Called once, on the writer's thread, with status() at the first write
  // error; the run can stop there (status() and failed() say the same later).
  std::function<void(const absl::Status&)> on_error;
};

// Whether a database could be written at `path` (its directory there and
// writable, the file not read-only), without creating anything: a run checks
// it before minutes of setup (the `cpu` profile's first calibration).
absl::Status CheckWritableDbPath(const std::string& path);

class Writer : public trace::Recorder {
 public:
  // Opens `path` for writing: creates it (WAL mode, schema v1, meta rows, all
  // in one transaction) when missing or empty, completes a file an older
  // version left half made, or opens an existing shardscope database to append
  // runs. Refuses what is not a regular file (a FIFO, a device), another tool's
  // file, a non-SQLite file, or a newer schema, naming the file.
  static absl::StatusOr<std::unique_ptr<Writer>> Open(const std::string& path,
                                                      WriterOptions options = {});
  // Writes what is queued, stops the thread and closes the file, leaving it
  // self-contained (WAL checkpointed, journal mode DELETE) unless another
  // connection still has it open. Does not end an open run: a run without
  // EndRun stays 'running' in `runs`, and run_writers.closed_at_ns tells
  // readers that its writer is gone (they show it as ended abnormally).
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
  // A program run's slices: one queue entry, one lock, however many slices.
  void RecordSlices(std::vector<trace::SliceRecord>&& slices) override { Push(SliceBatch{std::move(slices)}); }
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
  void Record(const trace::HangRecord& r) override { Push(r); }

  // Appends to the current run's runs.capture_note ("; " between notes): what
  // the timeline leaves out and why, so no report shows a silent gap.
  void AddCaptureNote(std::string note) { Push(CaptureNote{std::move(note)}); }
  // Why the run will not be ended (a hang detected, a chip lost): written
  // into run_writers.note when the writer closes, so readers that show the
  // run as ended abnormally say why (run_status, `shardscope runs`).
  void SetAbandonReason(std::string why) { Push(AbandonReason{std::move(why)}); }
  // No more slices are coming for `track_id` (an import writes its lanes one
  // after another): its open chunk and summaries are written and the memory
  // they held is freed, so a trace of 100k lanes does not hold 100k lanes'
  // state. A slice for it later starts it anew (its summaries merge with
  // the rows written).
  void EndTrack(int64_t track_id) { Push(TrackEnd{track_id}); }
  // Sets `key` of the current run's runs.config_json to `json` (a JSON text):
  // what the run learned of its own configuration as it ran (a fault that
  // turned out to have no effect: "fault_notes").
  void SetConfigField(std::string key, std::string json) { Push(ConfigField{std::move(key), std::move(json)}); }
  // Slices dropped by max_capture_bytes so far.
  int64_t slices_not_captured() const { return not_captured_.load(); }

  // Blocks until everything recorded before the call is committed (visible to
  // readers, safe from a crash of this process).
  void Flush() override;
  // Marks the current run 'finished' with its end time (or 'incomplete' when
  // records of it were lost: run_writers says how many and why), then flushes.
  void EndRun() override;
  // What a crash or exit() would lose, written within `budget`: the queue and
  // the open chunks and summaries. For the process's crash and exit handlers
  // (installed with the first writer): a program that throws, aborts, calls
  // exit() or faults a few ms after its last step keeps its steps. False when
  // the budget ran out (the writer stuck, or the crash on its own thread).
  bool FlushWithin(std::chrono::milliseconds budget);
  // Ends the current run as 'interrupted' (`note`: the signal) within
  // `budget`, everything queued before it written: for the handler of
  // SIGINT, SIGTERM and SIGHUP (installed with the first writer where the
  // program left them at their defaults). False when the budget ran out.
  bool EndRunInterruptedWithin(std::string note, std::chrono::milliseconds budget);
  // Ends the current run as its hang detector ended it (status 'hang
  // detected'), `message` (the detector's sentence) as its note in
  // run_writers: a run stopped on purpose, not a writer that went away.
  void EndRunByHangDetector(std::string message);
  // Ends the current run as 'failed': the program stopped with an error (out
  // of memory, a bad argument); `message` is the error, kept as the run's note.
  void EndRunFailed(std::string message);
  // Flush()/EndRun() followed by status(): for callers that want the error.
  absl::Status FlushAndCheck();
  absl::Status EndRunAndCheck();

  // The first error the background writer hit (OK when none), set as soon as
  // it happens and naming the file. Writing goes on after an error; later
  // errors are counted in the message, never abort.
  absl::Status status() const;
  // True once status() is an error: a cheap poll for a run's loop.
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  // Records of the current run that did not reach the file.
  int64_t records_lost() const { return records_lost_.load(); }
  // Rows written so far (all tables), for throughput reports.
  int64_t rows_written() const { return rows_written_.load(); }
  const std::string& path() const { return path_; }

 private:
  struct RunBegin { trace::RunRecord run; };
  struct RunEnd {
    int64_t ended_at_ns = 0;
    std::string status;  // "": finished, or incomplete when records were lost
    std::string note;    // run_writers.note, before any loss note
  };
  struct ConfigField { std::string key, json; };
  // Writes what open chunks and summary buckets hold, so readers see it.
  struct FlushMark {};
  struct TrackEnd { int64_t track_id = 0; };
  struct CaptureNote { std::string text; };
  struct AbandonReason {
    std::string text;
  };
  struct SliceBatch { std::vector<trace::SliceRecord> slices; };
  using Item =
      std::variant<RunBegin, RunEnd, FlushMark, TrackEnd, CaptureNote, AbandonReason, ConfigField, SliceBatch,
                   trace::HostRecord,
                   trace::DeviceRecord, trace::MeshRecord, trace::TrackRecord, trace::SliceRecord,
                   trace::GraphRecord, trace::OpRecord, trace::MemoryPlanRecord, trace::FusionRecord,
                   trace::PassRecord, trace::ShardingRecord, trace::AutoShardingRecord,
                   trace::CompilationRecord, trace::ExecutionRecord, trace::StepRecord, trace::TensorRecord,
                   trace::ShardPlacementRecord, trace::CounterRecord, trace::HangRecord>;
  class Db;  // the connection and prepared statements, used only by the thread

  explicit Writer(std::string path, std::unique_ptr<Db> db, WriterOptions options);
  // Queues one item; returns its sequence number (for waiting on it).
  uint64_t Push(Item item);
  void WaitWritten(uint64_t seq);
  void Loop();
  // Writes one batch in one transaction, retrying it while the file is locked.
  int64_t WriteBatch(const std::vector<Item>& batch);
  void SetError(absl::Status st, int64_t count = 1);

  std::string path_;
  std::unique_ptr<Db> db_;
  WriterOptions options_;

  mutable std::mutex mu_;
  std::condition_variable queued_cv_;   // the thread waits for work
  std::condition_variable written_cv_;  // Flush and full-queue producers wait
  std::vector<Item> queue_;
  uint64_t enqueued_ = 0;  // sequence number of the last queued item
  uint64_t written_ = 0;   // sequence number of the last committed item
  std::atomic<uint64_t> written_seen_{0};  // written_, for FlushWithin to poll without the lock
  bool PushWithin(Item item, std::chrono::milliseconds budget);
  pid_t owner_pid_ = 0;  // a forked child has no writer thread: its exit must not wait for one
  int waiters_ = 0;        // threads blocked in WaitWritten
  bool stop_ = false;
  absl::Status error_;
  int64_t error_count_ = 0;

  std::atomic<int64_t> run_id_{0};
  std::atomic<int64_t> rows_written_{0};
  std::atomic<int64_t> records_lost_{0};
  std::atomic<int64_t> not_captured_{0};
  std::atomic<bool> failed_{false};
  std::thread thread_;
};

}  // namespace shardscope::store
