// A view model computed once, off the UI thread. The workstation's analysis
// views (overview, op profile, memory, metrics, compare) each aggregate a
// stored run once — on a 10M-slice run that is seconds of SQL and decoding —
// so they build their model on a thread of its own, with its own read
// connection, and draw "loading" until it is there; a frame never queries.
// Destroying a job that is still running interrupts its query (the
// connection's progress handler) and joins the thread.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "store/reader.h"

namespace shardscope::app {

// Whether `db` is in WAL mode (the store's writer keeps it there while a run is written).
inline bool IsWal(sqlite3* db) {
  sqlite3_stmt* st = nullptr;
  bool wal = false;
  if (sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    const unsigned char* mode = sqlite3_column_text(st, 0);
    wal = mode && std::string_view(reinterpret_cast<const char*>(mode)) == "wal";
  }
  sqlite3_finalize(st);
  return wal;
}

template <typename T>
class BackgroundModel {
 public:
  // Builds the model from a reader of its own on `path`.
  using Build = std::function<absl::StatusOr<T>(const store::Reader&)>;

  BackgroundModel() = default;
  BackgroundModel(const BackgroundModel&) = delete;
  BackgroundModel& operator=(const BackgroundModel&) = delete;
  ~BackgroundModel() { Cancel(); }

  // Starts building (once; later calls do nothing until Cancel). `wake` is
  // called from the worker when the result is in, so an idle window redraws.
  void Start(const std::string& path, Build build, std::function<void()> wake = {}) {
    if (started_) return;
    started_ = true;
    auto state = state_ = std::make_shared<State>();
    const auto t0 = std::chrono::steady_clock::now();
    thread_ = std::thread([state, path, build = std::move(build), wake = std::move(wake), t0] {
      absl::StatusOr<T> result = absl::UnknownError("not built");
      auto reader = store::Reader::Open(path, store::Reader::Threads::kOneThread);
      if (!reader.ok()) {
        result = reader.status();
      } else {
        {
          std::lock_guard lock(state->mu);
          state->connection = reader->connection();
        }
        // Every statement after a Cancel fails at once, not only the one
        // running when it came.
        sqlite3_progress_handler(
            reader->connection(), 1000, [](void* s) { return static_cast<State*>(s)->cancelled ? 1 : 0; },
            state.get());
        // One snapshot for the whole build: a run being written gained steps
        // between its queries ("a value is read back in 189 of 187 steps").
        // Only under WAL (a run being written), where a reader never blocks the writer.
        const bool snapshot = IsWal(reader->connection()) &&
                              sqlite3_exec(reader->connection(), "BEGIN", nullptr, nullptr, nullptr) == SQLITE_OK;
        if (!state->cancelled) result = build(*reader);
        if (snapshot) sqlite3_exec(reader->connection(), "COMMIT", nullptr, nullptr, nullptr);
        std::lock_guard lock(state->mu);
        state->connection = nullptr;
      }
      {
        std::lock_guard lock(state->mu);
        state->result = std::move(result);
        state->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        state->done = true;
      }
      state->cv.notify_all();
      if (wake) wake();
    });
  }

  bool started() const { return started_; }
  bool ready() const {
    if (!state_) return false;
    std::lock_guard lock(state_->mu);
    return state_->done;
  }
  // Waits up to `timeout_s` for the result; true once it is in.
  bool Wait(double timeout_s) const {
    if (!state_) return false;
    std::unique_lock lock(state_->mu);
    return state_->cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return state_->done; });
  }
  // The result, once ready(); nullptr before.
  const absl::StatusOr<T>* result() const {
    if (!ready()) return nullptr;
    return &*state_->result;
  }
  // The model, when built and OK.
  const T* get() const {
    const absl::StatusOr<T>* r = result();
    return r && r->ok() ? &**r : nullptr;
  }
  // How long the build took (0 until ready).
  double seconds() const { return ready() ? state_->seconds : 0; }

  // Interrupts a running build and forgets the result; Start may run again.
  void Cancel() {
    if (state_) {
      state_->cancelled = true;
      std::lock_guard lock(state_->mu);
      if (state_->connection) sqlite3_interrupt(state_->connection);
    }
    if (thread_.joinable()) thread_.join();
    state_.reset();
    started_ = false;
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    sqlite3* connection = nullptr;
    std::atomic<bool> cancelled{false};
    bool done = false;
    double seconds = 0;
    std::optional<absl::StatusOr<T>> result;
  };
  std::shared_ptr<State> state_;
  std::thread thread_;
  bool started_ = false;
};

}  // namespace shardscope::app
