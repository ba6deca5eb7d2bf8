// A store that survives bad input and failure: what is not a regular file is
// refused without being opened, a half-made schema is named unfinished (and a
// writer completes it), a run whose writer is gone reads as ended abnormally, a
// finished file needs no side files, a full disk and a lock held by another
// process are reported at once and never leave a run 'finished' that lost
// rows, and `check` tells a whole file from a damaged one.
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <functional>
#include <stdexcept>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/check.h"
#include "store/reader.h"
#include "store/run_state.h"
#include "store/schema.h"
#include "store/sqlite_util.h"
#include "store/timeline.h"
#include "store/writer.h"
#include "tests/store/synthetic_run.h"
#include "tests/temp_files.h"

namespace shardscope::store {
namespace {

using namespace shardscope::trace;
using shardscope::testing::TempDbPath;

bool Contains(const absl::Status& st, const std::string& s) {
  return st.message().find(s) != std::string::npos;
}

bool Exists(const std::string& path) {
  struct stat sb;
  return ::stat(path.c_str(), &sb) == 0;
}

void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

QueryResult MustQuery(const std::string& path, const std::string& sql) {
  auto r = Reader::Open(path);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  auto q = r->Query(sql);
  EXPECT_TRUE(q.ok()) << sql << ": " << q.status();
  return q.ok() ? *q : QueryResult{};
}

// Steps [first, first + n): a track, `slices` slices per step, then the step's row.
void RecordSteps(Writer& w, int first, int n, int slices = 20) {
  if (first == 0) w.Record(TrackRecord{1, "host", Clock::kHost, -1, 0, "main"});
  for (int s = first; s < first + n; ++s) {
    for (int k = 0; k < slices; ++k) {
      SliceRecord sl;
      sl.slice_id = int64_t{s} * 1000 + k;
      sl.track_id = 1;
      sl.start_ns = sl.slice_id * 10;
      sl.dur_ns = 5;
      sl.name = absl::StrCat("op.", k, ".", std::string(40, 'x'));
      sl.kind = SliceKind::kHost;
      sl.step = s;
      w.Record(sl);
    }
    w.Record(StepRecord{s, 1.0, 100});
  }
}

// A file holding one finished run of two steps.
std::string WriteFinishedRun(const std::string& name) {
  const std::string path = TempDbPath(name);
  auto w = Writer::Open(path);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return path;
  EXPECT_TRUE((*w)->StartRun(RunRecord{}).ok());
  RecordSteps(**w, 0, 2);
  EXPECT_TRUE((*w)->EndRunAndCheck().ok());
  return path;
}

WriterOptions LockOptions(int busy_timeout_ms, int batch_attempts) {
  WriterOptions o;
  o.busy_timeout_ms = busy_timeout_ms;
  o.batch_attempts = batch_attempts;
  return o;
}

std::string SampleOf(const std::string& path) {
  auto r = Reader::Open(path);
  if (!r.ok()) return absl::StrCat("error: ", r.status().message());
  auto q = r->Query("SELECT sample FROM runs ORDER BY run_id LIMIT 1");
  return q.ok() && !q->rows.empty() ? q->Text(0, "sample") : "error: no row";
}

void CopyFile(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  out << in.rdbuf();
}

// A writer that stopped mid-transaction leaves a hot journal: the file then
// holds pages the transaction had not committed. A reader sees the committed
// state (the journal played back, as sqlite3 does), never those pages, and
// `check` calls the file healthy.
TEST(Robust, AHotJournalIsRolledBackNotRead) {
  const std::string path = WriteFinishedRun("hot_src"), hot = TempDbPath("hot");
  const std::string committed = SampleOf(path);
  ASSERT_EQ(committed.rfind("error", 0), std::string::npos) << committed;
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA journal_mode = DELETE; PRAGMA cache_size = 1; BEGIN;"
                             " UPDATE runs SET sample = 'uncommitted'; DELETE FROM slice_chunks;"
                             " UPDATE runs SET mesh = printf('%.4000c', 'x');",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  // What a crash leaves: the file with spilled pages, and its journal.
  CopyFile(path, hot);
  CopyFile(path + "-journal", hot + "-journal");
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  struct stat sb;
  ASSERT_EQ(::stat((hot + "-journal").c_str(), &sb), 0);
  ASSERT_GT(sb.st_size, 0);
  EXPECT_EQ(SampleOf(hot), committed);
  CheckReport report = CheckDatabase(hot);
  std::string problems;
  for (const auto& p : report.problems) absl::StrAppend(&problems, p, "\n");
  EXPECT_TRUE(report.healthy()) << problems;
}

// Another process in the middle of writing a rollback-journal file: a reader
// waits for it, then says the file is locked, never reading pages the
// writer has not committed.
TEST(Robust, AFileLockedByAWriterIsNeverReadUncommitted) {
  const std::string path = WriteFinishedRun("locked");
  const std::string committed = SampleOf(path);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA journal_mode = DELETE; PRAGMA cache_size = 1; BEGIN EXCLUSIVE;"
                             " UPDATE runs SET sample = 'uncommitted'; DELETE FROM slice_chunks;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  const std::string seen = SampleOf(path);
  EXPECT_NE(seen, "uncommitted");
  EXPECT_NE(seen.find("is locked by another process"), std::string::npos) << seen;
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  EXPECT_EQ(SampleOf(path), committed);
}

// A forked child (a data-loader worker) stopped by SIGTERM dies of it, and
// leaves its parent's run alone: the child's signal must not reach the
// parent's watcher (they share its pipe), which would end the parent's run as
// interrupted and kill the parent. And a run that already ended is not
// relabelled by a later stop signal (here: none arrives; its status stays).
TEST(Robust, AForkedChildsStopSignalLeavesTheParentsRunAlone) {
  const std::string path = TempDbPath("fork_sigterm");
  auto w = Writer::Open(path);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->StartRun(RunRecord{}).ok());
  RecordSteps(**w, 0, 2);
  ASSERT_TRUE((*w)->FlushAndCheck().ok());
  struct sigaction now {};
  sigaction(SIGTERM, nullptr, &now);
  if (now.sa_handler == SIG_DFL || now.sa_handler == SIG_IGN)  // the runner's own disposition: ours not installed
    GTEST_SKIP() << "SIGTERM was not at its default when the writer opened";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    kill(getpid(), SIGTERM);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    _exit(0);  // not reached: the signal kills it
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // what the parent's watcher would have done
  RecordSteps(**w, 2, 3);
  ASSERT_TRUE((*w)->EndRunAndCheck().ok());
  auto rd = Reader::Open(path);
  ASSERT_TRUE(rd.ok()) << rd.status();
  auto q = rd->Query("SELECT status FROM runs");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->Text(0, "status"), "finished");
}

// --- 1. Not a regular file -------------------------------------------------

TEST(Robust, FifoSocketAndDeviceAreRefusedWithoutOpening) {
  std::string fifo = TempDbPath("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // Opening a FIFO would block this test forever: the checks must stat it.
  auto r = Reader::Open(fifo);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status(), fifo + " is a FIFO")) << r.status();
  auto w = Writer::Open(fifo);
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(Contains(w.status(), fifo + " is a FIFO")) << w.status();
  CheckReport c = CheckDatabase(fifo);
  ASSERT_FALSE(c.healthy());
  EXPECT_NE(c.problems[0].find("FIFO"), std::string::npos);
  std::remove(fifo.c_str());

  std::string sock = TempDbPath("sock");
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  auto rs = Reader::Open(sock);
  EXPECT_TRUE(Contains(rs.status(), sock + " is a socket")) << rs.status();
  EXPECT_TRUE(Contains(Writer::Open(sock).status(), "is a socket"));
  close(fd);
  std::remove(sock.c_str());

  auto dev = Reader::Open("/dev/null");
  EXPECT_TRUE(Contains(dev.status(), "/dev/null is a character device")) << dev.status();
  EXPECT_TRUE(Contains(Writer::Open("/dev/null").status(), "is a character device"));
}

// --- 2. Half-made schemas --------------------------------------------------

TEST(Robust, SchemaLeftHalfMadeByAnOlderVersionIsUnfinishedAndAWriterCompletesIt) {
  std::string path = TempDbPath("half");
  // What an older version left when killed while making the schema: it ran
  // the statements one by one (meta first) and wrote meta's rows last.
  std::string schema = SchemaSql();
  size_t cut = schema.find("CREATE TABLE IF NOT EXISTS tracks");
  ASSERT_NE(cut, std::string::npos);
  RawExec(path, "PRAGMA journal_mode = WAL;" + schema.substr(0, cut));

  auto r = Reader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status(), path + " was left unfinished by a shardscope run that stopped while creating "
                                          "it; remove it or run again to complete it"))
      << r.status();
  CheckReport c = CheckDatabase(path);
  ASSERT_FALSE(c.healthy());
  EXPECT_NE(c.problems[0].find("left unfinished"), std::string::npos) << c.problems[0];

  {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE((*w)->StartRun(RunRecord{}).ok());
    RecordSteps(**w, 0, 2);
    ASSERT_TRUE((*w)->EndRunAndCheck().ok());
  }
  EXPECT_TRUE(CheckDatabase(path).healthy());
  EXPECT_EQ(MustQuery(path, "SELECT count(*) AS n FROM steps").Int(0, "n"), 2);
  for (const std::string& name : internal::SchemaObjectNames()) {
    EXPECT_EQ(MustQuery(path, "SELECT count(*) AS n FROM sqlite_master WHERE name = '" + name + "'").Int(0, "n"), 1)
        << name;
  }
}

TEST(Robust, AnEmptyDatabaseIsUnfinishedButAnotherToolsFileIsForeign) {
  std::string path = TempDbPath("empty");
  RawExec(path, "PRAGMA journal_mode = WAL;");  // killed right after the journal mode was set
  EXPECT_TRUE(Contains(Reader::Open(path).status(), "left unfinished")) << Reader::Open(path).status();
  EXPECT_TRUE(Writer::Open(path).ok());
  std::string foreign = TempDbPath("foreign_meta");
  // A meta table without rows, but also a table that is not ours: not our leftover.
  RawExec(foreign, "CREATE TABLE meta (key TEXT, value TEXT); CREATE TABLE photos (id INTEGER);");
  auto f = Reader::Open(foreign);
  EXPECT_TRUE(Contains(f.status(), "was it written by another tool?")) << f.status();
  EXPECT_FALSE(Writer::Open(foreign).ok());
}

// A whole file whose meta rows alone were lost (a hand edit, a tool that
// "cleaned" the table) was called unfinished, with advice to remove it and
// its runs. It holds runs: the error says so and how to put the rows back,
// and a writer will not take it over either.
TEST(Robust, LostMetaRowsOnAFileWithRunsAreNotUnfinished) {
  const std::string path = WriteFinishedRun("lost_meta");
  RawExec(path, "DELETE FROM meta;");
  auto r = Reader::Open(path);
  EXPECT_TRUE(Contains(r.status(), "has lost its meta rows (tool, schema_version) but holds 1 run: do not remove it"))
      << r.status();
  EXPECT_FALSE(Contains(r.status(), "remove it or run again")) << r.status();
  EXPECT_FALSE(Writer::Open(path).ok());
  // The advice works: with the rows back, the file reads and checks healthy.
  RawExec(path, absl::StrCat("INSERT INTO meta VALUES ('tool', 'shardscope'), ('schema_version', '",
                             kSchemaVersion, "');"));
  EXPECT_TRUE(Reader::Open(path).ok());
  EXPECT_TRUE(CheckDatabase(path).healthy());
}

// A dropped table every version has is a problem, and only that: not also
// "written before table `counters` existed" in the notes.
TEST(Robust, AMissingRequiredTableIsNotAlsoALaterAddition) {
  const std::string path = WriteFinishedRun("no_counters");
  RawExec(path, "DROP TABLE counters;");
  CheckReport c = CheckDatabase(path);
  EXPECT_FALSE(c.healthy());
  bool said = false;
  for (const std::string& p : c.problems) said |= p == "table `counters` is missing";
  EXPECT_TRUE(said);
  for (const std::string& n : c.notes) EXPECT_EQ(n.find("table `counters`"), std::string::npos) << n;
}

// SQLite says "unable to open database file" for a directory that is not
// there; the writer names it.
TEST(Robust, AMissingDirectoryIsNamed) {
  auto w = Writer::Open("/nonexistent_shardscope_dir/sub/run.db");
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(Contains(w.status(), "the directory /nonexistent_shardscope_dir/sub does not exist")) << w.status();
}

TEST(Robust, SchemaAndMetaAreCreatedInOneTransaction) {
  // Another process holds the write lock while the file is created: the
  // writer gives up with nothing half made, and a later writer succeeds.
  std::string path = TempDbPath("one_txn");
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder, "PRAGMA journal_mode = WAL; BEGIN EXCLUSIVE;", nullptr, nullptr, nullptr),
            SQLITE_OK);
  auto w = Writer::Open(path, LockOptions(50, 1));
  EXPECT_FALSE(w.ok());
  sqlite3_exec(holder, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(holder);
  EXPECT_TRUE(Contains(Reader::Open(path).status(), "left unfinished")) << Reader::Open(path).status();
  auto again = Writer::Open(path);
  ASSERT_TRUE(again.ok()) << again.status();
}

// --- 3. Runs whose writer is gone ------------------------------------------

TEST(Robust, RunStateFollowsTheWriter) {
  std::string path = TempDbPath("state");
  auto w = Writer::Open(path);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->StartRun(RunRecord{}).ok());
  RecordSteps(**w, 0, 3);
  (*w)->Flush();
  {
    auto r = Reader::Open(path);
    ASSERT_TRUE(r.ok());
    auto st = ReadRunState(*r, 1);
    ASSERT_TRUE(st.ok()) << st.status();
    EXPECT_EQ(st->status, "running");
    EXPECT_EQ(st->last_step, 2);
    QueryResult who = r->Query("SELECT host, pid, boot_id, token FROM run_writers").value();
    EXPECT_EQ(who.Int(0, "pid"), getpid());
    EXPECT_EQ(who.Text(0, "host"), ThisProcess().host);
    EXPECT_FALSE(who.Text(0, "token").empty());
    EXPECT_EQ(r->Query("SELECT status FROM run_status").value().Text(0, "status"), "running");
  }
  w->reset();  // closed without EndRun
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  auto st = ReadRunState(*r, 1);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->stored_status, "running");
  EXPECT_EQ(st->status, "ended abnormally");
  EXPECT_EQ(st->Describe().rfind("ended abnormally after step 2: its writer (pid ", 0), 0u) << st->Describe();
  EXPECT_NE(st->Describe().find("closed the file without ending the run"), std::string::npos);
  QueryResult view = r->Query("SELECT status, last_step FROM run_status WHERE run_id = 1").value();
  EXPECT_EQ(view.Text(0, "status"), "ended abnormally");
  EXPECT_EQ(view.Int(0, "last_step"), 2);
}

TEST(Robust, ARunWhoseProcessDiedEndedAbnormally) {
  std::string path = TempDbPath("died");
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto w = Writer::Open(path);
    if (!w.ok() || !(*w)->StartRun(RunRecord{}).ok()) _exit(2);
    RecordSteps(**w, 0, 4);
    (*w)->Flush();
    _exit(0);  // no EndRun, no destructor: as if killed
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  auto r = Reader::Open(path);  // the writer left its -wal: still readable
  ASSERT_TRUE(r.ok()) << r.status();
  auto st = ReadRunState(*r, 1);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->status, "ended abnormally");
  EXPECT_EQ(st->Describe(), absl::StrCat("ended abnormally after step 3: its writer (pid ", child, " on host ",
                                         ThisProcess().host, ") is gone: killed or crashed"));
  // The heartbeat is recent, so the view (which cannot ask the kernel) still says running...
  EXPECT_EQ(r->Query("SELECT status FROM run_status").value().Text(0, "status"), "running");
  EXPECT_TRUE(CheckDatabase(path).healthy());
}

// A program that dies a few ms after its last step (an uncaught exception,
// abort, exit without Finish, a fault) keeps the steps it recorded: the
// writer's crash and exit handlers write what was queued and open. Without
// them the last 100 ms (the writer's linger) were lost, all of a short run.
TEST(Robust, WhatWasRecordedSurvivesACrashRightAfterIt) {
  const std::vector<std::pair<std::string, std::function<void()>>> deaths = {
      {"throw", [] { throw std::runtime_error("bad batch"); }},
      {"abort", [] { std::abort(); }},
      {"exit", [] { std::exit(3); }},
      {"segv", [] { raise(SIGSEGV); }},
  };
  for (const auto& [how, die] : deaths) {
    std::string path = TempDbPath(absl::StrCat("crash_", how));
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto w = Writer::Open(path);
      if (!w.ok() || !(*w)->StartRun(RunRecord{}).ok()) _exit(2);
      RecordSteps(**w, 0, 4);
      // No Flush, no EndRun, no destructor; noexcept: a throw reaches
      // std::terminate, as an uncaught one in a program does (not gtest's catch).
      [&]() noexcept { die(); }();
      _exit(0);
    }
    int wstatus = 0;
    ASSERT_EQ(waitpid(child, &wstatus, 0), child);
    if (how == "exit") EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 3) << how << ": " << wstatus;
    else EXPECT_TRUE(WIFSIGNALED(wstatus)) << how << ": " << wstatus;  // the handlers pass the death on
    auto r = Reader::Open(path);
    ASSERT_TRUE(r.ok()) << how << ": " << r.status();
    EXPECT_EQ(r->Query("SELECT count(*) AS n FROM steps").value().Int(0, "n"), 4) << how;
    auto st = ReadRunState(*r, 1);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->status, "ended abnormally") << how;
  }
}

// A file whose writer died mid-run: its -wal holds frames (the child _exits
// with no checkpoint).
std::string WriteCrashedRun(const std::string& name) {
  const std::string path = TempDbPath(name);
  pid_t child = fork();
  EXPECT_GE(child, 0);
  if (child == 0) {
    auto w = Writer::Open(path);
    if (!w.ok() || !(*w)->StartRun(RunRecord{}).ok()) _exit(2);
    RecordSteps(**w, 0, 6);
    (*w)->Flush();
    _exit(0);
  }
  int wstatus = 0;
  EXPECT_EQ(waitpid(child, &wstatus, 0), child);
  return path;
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A finished file copied over one whose writer died: the dead run's -wal
// would be read (and, by a writer, checkpointed) as the finished file's.
TEST(Robust, AWalLeftByAnotherDatabaseIsRefusedNotRead) {
  const std::string good = WriteFinishedRun("foreign_wal_good");
  const std::string x = WriteCrashedRun("foreign_wal_x");
  struct stat wal;
  ASSERT_EQ(::stat((x + "-wal").c_str(), &wal), 0);
  ASSERT_GT(wal.st_size, 32) << "the crashed run should leave frames in its -wal";
  { std::ofstream(x, std::ios::binary | std::ios::trunc) << Bytes(good); }
  const std::string before = Bytes(x);
  auto r = Reader::Open(x);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_TRUE(Contains(r.status(), x + "-wal does not belong to " + x)) << r.status();
  auto w = Writer::Open(x);
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(Contains(w.status(), "does not belong")) << w.status();
  CheckReport c = CheckDatabase(x);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_TRUE(c.problems[0].find("does not belong") != std::string::npos) << c.problems[0];
  EXPECT_EQ(Bytes(x), before) << "nothing may be written into the file";
  // Moved aside, the file reads as what it is: the finished run of two steps.
  ASSERT_EQ(std::rename((x + "-wal").c_str(), (x + "-wal.old").c_str()), 0);
  std::remove((x + "-shm").c_str());
  test_files::RemoveAtExit(x + "-wal.old");
  EXPECT_EQ(MustQuery(x, "SELECT count(*) AS n FROM steps").Int(0, "n"), 2);
}

// A table of shardscope's own dropped by hand: every command that needs it
// names the file and points at check; a user's typo stays a plain SQL error.
TEST(Robust, AMissingSchemaTableNamesTheFile) {
  const std::string path = WriteFinishedRun("dropped_names");
  RawExec(path, "DROP TABLE names;");
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  auto q = r->Query("SELECT n.name FROM slices s JOIN names n ON n.name_id = s.name_id");
  ASSERT_FALSE(q.ok());
  EXPECT_TRUE(absl::IsDataLoss(q.status())) << q.status();
  EXPECT_TRUE(Contains(q.status(), path + " lacks `names`, which shardscope writes into every file")) << q.status();
  EXPECT_TRUE(Contains(q.status(), "`shardscope check " + path + "`")) << q.status();
  auto typo = r->Query("SELECT * FROM nmaes");
  ASSERT_FALSE(typo.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(typo.status())) << typo.status();
  EXPECT_TRUE(Contains(typo.status(), "SQL error: no such table: nmaes")) << typo.status();
}

TEST(Robust, AFileCutShortIsSaidToBeTruncated) {
  const std::string path = WriteFinishedRun("truncated");
  struct stat sb;
  ASSERT_EQ(::stat(path.c_str(), &sb), 0);
  ASSERT_EQ(::truncate(path.c_str(), sb.st_size - 16384), 0);
  auto r = Reader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
  EXPECT_TRUE(Contains(r.status(), path + " is truncated: its header counts")) << r.status();
  EXPECT_TRUE(Contains(r.status(), "(16384 bytes, 1 page, missing from its end)")) << r.status();
  EXPECT_FALSE(Writer::Open(path).ok());
  CheckReport c = CheckDatabase(path);
  ASSERT_FALSE(c.problems.empty());
  EXPECT_TRUE(c.problems[0].find("is truncated") != std::string::npos) << c.problems[0];
}

// A copy of a file whose run was still writing it: its contents are in the
// -wal left behind.
TEST(Robust, ACopyWithoutItsWalSaysWhereItsContentsAre) {
  const std::string x = WriteCrashedRun("wal_copy_src");
  const std::string copy = TempDbPath("wal_copy");
  { std::ofstream(copy, std::ios::binary | std::ios::trunc) << Bytes(x); }
  auto r = Reader::Open(copy);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status(), "a copy of a file whose run was still writing it, and its contents are in " +
                                       copy + "-wal, which is not here"))
      << r.status();
}

// Appending to a damaged b-tree would spread the damage into the new run.
TEST(Robust, AWriterRefusesAFileWhoseBtreesAreDamaged) {
  const std::string path = WriteFinishedRun("damaged_btree");
  int64_t root = 0, page_size = 0;
  {
    auto r = Reader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status();
    root = r->Query("SELECT rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name = 'slice_chunks' LIMIT 1")
               .value()
               .Int(0, "rootpage");
    page_size = r->Query("PRAGMA page_size").value().Int(0, "page_size");
  }
  ASSERT_GT(root, 1);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp((root - 1) * page_size);
    const std::string junk(page_size, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  const std::string before = Bytes(path);
  auto w = Writer::Open(path);
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(absl::IsDataLoss(w.status())) << w.status();
  EXPECT_TRUE(Contains(w.status(), "a new run is not written into it")) << w.status();
  EXPECT_EQ(Bytes(path), before);
}

// A child forked while the parent has a writer open (a user's worker
// process) has no writer thread: its exit does not wait for one (the exit
// handler's 5 s budget), nor writes into the parent's file.
TEST(Robust, AForkedChildsExitDoesNotWaitForItsParentsWriter) {
  std::string path = TempDbPath("fork_exit");
  auto w = Writer::Open(path);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->StartRun(RunRecord{}).ok());
  RecordSteps(**w, 0, 2);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) std::exit(0);  // atexit handlers run
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  EXPECT_LT(secs, 4.0) << "the child waited for a writer thread it does not have";
  (*w)->EndRun();
}

TEST(Robust, ARunWrittenOnAnotherHostGoesByItsHeartbeat) {
  std::string path = TempDbPath("elsewhere");
  {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->StartRun(RunRecord{}).ok());
    ASSERT_TRUE((*w)->StartRun(RunRecord{}).ok());
  }
  // Two runs "still being written" on another machine: one beat a second
  // ago, one two minutes ago.
  int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  RawExec(path, absl::StrCat("UPDATE run_writers SET host = 'far-away', closed_at_ns = NULL, heartbeat_ns = ",
                             now - 1'000'000'000, " WHERE run_id = 1; UPDATE run_writers SET host = 'far-away',"
                             " closed_at_ns = NULL, heartbeat_ns = ", now - 120'000'000'000, " WHERE run_id = 2;"));
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  auto states = ReadRunStates(*r);
  ASSERT_TRUE(states.ok());
  ASSERT_EQ(states->size(), 2u);
  EXPECT_EQ((*states)[0].status, "running");
  EXPECT_EQ((*states)[1].status, "ended abnormally");
  EXPECT_NE((*states)[1].detail.find("no sign of life from its writer"), std::string::npos) << (*states)[1].detail;
  QueryResult view = r->Query("SELECT status FROM run_status ORDER BY run_id").value();
  EXPECT_EQ(view.Text(0, "status"), "running");
  EXPECT_EQ(view.Text(1, "status"), "ended abnormally");
}

// A writer's pid alive on this machine, its start time unknown (0): the pid
// may be another process's now, so a stale heartbeat ends the run, as the
// run_status view says; with its start time known and matching, the run stays
// running however old its heartbeat (a process stopped in a debugger).
TEST(Robust, AnAlivePidWithoutItsStartTimeGoesByTheHeartbeat) {
  std::string path = TempDbPath("pid_reused");
  {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->StartRun(RunRecord{}).ok());
    ASSERT_TRUE((*w)->StartRun(RunRecord{}).ok());
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  const int64_t stale = now - 600'000'000'000;
  // Run 1: this process's pid (alive), start unknown. Run 2: this process, start known.
  RawExec(path, absl::StrCat("UPDATE runs SET status = 'running'; UPDATE run_writers SET closed_at_ns = NULL,"
                             " heartbeat_ns = ", stale, ", pid = ", getpid(), ";"
                             " UPDATE run_writers SET process_start = 0 WHERE run_id = 1;"));
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  auto states = ReadRunStates(*r);
  ASSERT_TRUE(states.ok());
  ASSERT_EQ(states->size(), 2u);
  EXPECT_EQ((*states)[0].status, "ended abnormally") << (*states)[0].detail;
  EXPECT_NE((*states)[0].detail.find("no sign of life from"), std::string::npos) << (*states)[0].detail;
  EXPECT_EQ((*states)[1].status, "running") << (*states)[1].detail;
}

TEST(Robust, ProcessAliveSeesZombiesAndReusedPids) {
  ProcessIdentity me = ThisProcess();
  EXPECT_EQ(ProcessAlive(me), true);
  ProcessIdentity reused = me;
  reused.start_ticks = me.start_ticks + 12345;  // same pid, another process
  EXPECT_EQ(ProcessAlive(reused), me.start_ticks == 0 ? true : false);
  ProcessIdentity rebooted = me;
  rebooted.boot_id = "another-boot";
  EXPECT_EQ(ProcessAlive(rebooted), me.boot_id.empty());
  ProcessIdentity elsewhere = me;
  elsewhere.host = "some-other-host";
  EXPECT_FALSE(ProcessAlive(elsewhere).has_value());
  pid_t child = fork();
  if (child == 0) _exit(0);
  usleep(100000);  // it exits; not reaped yet: a zombie
  ProcessIdentity zombie = me;
  zombie.pid = child;
  zombie.start_ticks = 0;
  EXPECT_EQ(ProcessAlive(zombie), false);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(ProcessAlive(zombie), false);
}

// --- 4. Finished files are self-contained ----------------------------------

TEST(Robust, AClosedWriterLeavesOneSelfContainedFile) {
  std::string path = TempDbPath("alone");
  {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->StartRun(RunRecord{}).ok());
    RecordSteps(**w, 0, 5);
    ASSERT_TRUE((*w)->EndRunAndCheck().ok());
  }
  EXPECT_FALSE(Exists(path + "-wal"));
  EXPECT_FALSE(Exists(path + "-shm"));
  EXPECT_EQ(MustQuery(path, "PRAGMA journal_mode").Text(0, "journal_mode"), "delete");
  internal::ReadOpenFacts f = internal::GatherReadOpenFacts(path);
  EXPECT_FALSE(f.wal_mode);
  // Read from a directory nobody may write (the decision; root could write
  // anyway, the real read-only mount is in process_test).
  f.dir_writable = false;
  EXPECT_EQ(internal::DecideReadOpen(f), internal::ReadOpenMode::kReadOnly);
}

TEST(Robust, ReadOpenDecision) {
  using internal::DecideReadOpen;
  using internal::ReadOpenFacts;
  using internal::ReadOpenMode;
  // A rollback-journal file reads with no side files, anywhere.
  EXPECT_EQ(DecideReadOpen({.wal_mode = false, .dir_writable = false}), ReadOpenMode::kReadOnly);
  // WAL: -shm can be made: the normal read-only open.
  EXPECT_EQ(DecideReadOpen({.wal_mode = true, .dir_writable = true, .wal_has_data = true}), ReadOpenMode::kReadOnly);
  // WAL on read-only media, or copied without its -wal into such a place: immutable.
  EXPECT_EQ(DecideReadOpen({.wal_mode = true, .dir_writable = false, .wal_has_data = false}),
            ReadOpenMode::kImmutable);
  // An existing writable -shm serves.
  EXPECT_EQ(DecideReadOpen({.wal_mode = true, .dir_writable = false, .wal_has_data = false, .shm_exists = true,
                            .shm_writable = true}),
            ReadOpenMode::kReadOnly);
  // Commits in a -wal that cannot be read here: said so, never silently dropped.
  EXPECT_EQ(DecideReadOpen({.wal_mode = true, .dir_writable = false, .wal_has_data = true}),
            ReadOpenMode::kWalUnreachable);
  EXPECT_EQ(DecideReadOpen({.wal_mode = true, .dir_writable = false, .wal_has_data = true, .shm_exists = true}),
            ReadOpenMode::kReadOnly);
  EXPECT_EQ(internal::FileUri("/a b/x?y#%.db", "immutable=1"), "file:///a%20b/x%3Fy%23%25.db?immutable=1");
}

TEST(Robust, AWalFileCopiedWithoutItsWalReads) {
  // A copy of a running (or killed) run's file, without its -wal: the header
  // says WAL; what was checkpointed reads.
  std::string path = TempDbPath("walsrc");
  auto w = Writer::Open(path);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->StartRun(RunRecord{}).ok());
  RecordSteps(**w, 0, 3);
  (*w)->Flush();
  RawExec(path, "PRAGMA wal_checkpoint(PASSIVE)");
  std::string copy = TempDbPath("walcopy");
  {
    std::ifstream in(path, std::ios::binary);
    std::ofstream out(copy, std::ios::binary);
    out << in.rdbuf();
  }
  w->reset();
  EXPECT_TRUE(internal::GatherReadOpenFacts(copy).wal_mode);
  EXPECT_EQ(MustQuery(copy, "SELECT count(*) AS n FROM steps").Int(0, "n"), 3);
}

// --- 5. A full disk --------------------------------------------------------

TEST(Robust, AFullDiskIsReportedAtOnceAndWhatWasCommittedStays) {
  std::string path = TempDbPath("full");
  { ASSERT_TRUE(Writer::Open(path).ok()); }
  struct stat sb;
  ASSERT_EQ(::stat(path.c_str(), &sb), 0);
  std::atomic<int> callbacks{0};
  std::string callback_message;
  WriterOptions opt;
  opt.max_file_bytes = sb.st_size + (96 << 10);  // the disk fills after a few dozen steps
  opt.on_error = [&](const absl::Status& st) {
    callback_message = std::string(st.message());
    ++callbacks;
  };
  auto w = Writer::Open(path, opt);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->StartRun(RunRecord{}).ok());
  int stopped_at = -1;
  for (int s = 0; s < 1000; ++s) {
    RecordSteps(**w, s, 1);
    (*w)->Flush();  // a step's records are committed before the next starts
    if ((*w)->failed()) {
      stopped_at = s;
      break;
    }
  }
  ASSERT_GE(stopped_at, 1) << "the disk never filled";
  absl::Status st = (*w)->status();
  EXPECT_TRUE(absl::IsResourceExhausted(st)) << st;
  EXPECT_TRUE(Contains(st, path)) << st;
  EXPECT_TRUE(Contains(st, "full")) << st;
  EXPECT_EQ(callbacks.load(), 1);
  EXPECT_EQ(callback_message, std::string(st.message()));
  EXPECT_GT((*w)->records_lost(), 0);
  (*w)->EndRun();  // may not fit either
  w->reset();

  // Every step before the one that did not fit is there, whole.
  CheckReport c = CheckDatabase(path);
  EXPECT_TRUE(c.healthy()) << (c.problems.empty() ? "" : c.problems[0]);
  QueryResult q = MustQuery(path, "SELECT count(*) AS n, max(step) AS last FROM steps");
  EXPECT_EQ(q.Int(0, "n"), stopped_at);
  EXPECT_EQ(q.Int(0, "last"), stopped_at - 1);
  EXPECT_EQ(MustQuery(path, "SELECT count(*) AS n FROM steps s WHERE (SELECT count(*) FROM slices l"
                            " WHERE l.step = s.step) <> 20").Int(0, "n"), 0);
  EXPECT_GE(MustQuery(path, "SELECT count(*) AS n FROM slices").Int(0, "n"), int64_t{stopped_at} * 20);
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  auto state = ReadRunState(*r, 1);
  ASSERT_TRUE(state.ok());
  EXPECT_NE(state->status, "finished");
  EXPECT_NE(state->status, "running");
}

// --- 6. A lock held by another process -------------------------------------

TEST(Robust, ABatchIsRetriedWhileAnotherProcessHoldsTheLock) {
  std::string path = TempDbPath("busy_retry");
  auto w = Writer::Open(path, LockOptions(20, 40));
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->StartRun(RunRecord{}).ok());
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));  // several busy timeouts
    sqlite3_exec(holder, "ROLLBACK", nullptr, nullptr, nullptr);
  });
  RecordSteps(**w, 0, 5);
  (*w)->Flush();
  release.join();
  sqlite3_close(holder);
  EXPECT_TRUE((*w)->status().ok()) << (*w)->status();
  ASSERT_TRUE((*w)->EndRunAndCheck().ok());
  w->reset();
  EXPECT_EQ(MustQuery(path, "SELECT count(*) AS n FROM slices").Int(0, "n"), 100);
  EXPECT_EQ(MustQuery(path, "SELECT status FROM runs").Text(0, "status"), "finished");
}

// SQLite opens files by full paths under 512 bytes; a longer one (legal on
// Linux) got only "unable to open database file". Now the limit is named.
TEST(Robust, APathTooLongForSQLiteIsSaidToBe) {
  std::string dir = ::testing::TempDir() + "/long_path_" + std::to_string(getpid());
  for (int k = 0; k < 3; ++k) dir += "/" + std::string(200, 'd');
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  const std::string path = dir + "/x.db";
  auto w = Writer::Open(path);
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(Contains(w.status(), "paths under 512 bytes")) << w.status();
  EXPECT_TRUE(Contains(Reader::Open(path).status(), "paths under 512 bytes")) << Reader::Open(path).status();
  std::system(("rm -rf " + ::testing::TempDir() + "/long_path_" + std::to_string(getpid())).c_str());
}

// A killed run's file (WAL mode, its commits in its -wal) with another
// killed file's -wal copied beside it: SQLite read the stranger's runs as the
// file's, `check` called it healthy, and a new run checkpointed them in. The
// file's id, read through the -wal and from the main file, tells them apart.
TEST(Robust, AWalOfAnotherDatabaseBesideAKilledRunsFileIsRefused) {
  const std::string a = TempDbPath("wal_owner_a"), b = TempDbPath("wal_owner_b"), mixed = TempDbPath("wal_mixed"),
                    own = TempDbPath("wal_own");
  auto wa = Writer::Open(a);
  auto wb = Writer::Open(b);
  ASSERT_TRUE(wa.ok() && wb.ok());
  ASSERT_TRUE((*wa)->StartRun(RunRecord{}).ok());
  ASSERT_TRUE((*wb)->StartRun(RunRecord{}).ok());
  RecordSteps(**wa, 0, 2);
  RecordSteps(**wb, 0, 5);
  (*wa)->Flush();
  (*wb)->Flush();
  // What a kill leaves, copied while the writers hold the files.
  CopyFile(a, mixed);
  CopyFile(b + "-wal", mixed + "-wal");
  CopyFile(a, own);
  CopyFile(a + "-wal", own + "-wal");
  wa->reset();
  wb->reset();
  EXPECT_TRUE(Contains(Reader::Open(mixed).status(), "-wal does not belong to")) << Reader::Open(mixed).status();
  auto w = Writer::Open(mixed);
  EXPECT_FALSE(w.ok());
  EXPECT_TRUE(Contains(w.status(), "-wal does not belong to")) << w.status();
  EXPECT_FALSE(CheckDatabase(mixed).healthy());
  // The file's own -wal reads as before.
  auto r = Reader::Open(own);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(MustQuery(own, "SELECT count(*) AS n FROM steps").Int(0, "n"), 2);
}

// A finished file (rollback journal) that another process is writing: a new
// writer waits for its lock as the busy timeout says. Switching the file to
// WAL took SQLite's SQLITE_BUSY at once ("cannot set up: database is locked").
TEST(Robust, ANewWriterWaitsForAnotherProcessWritingAFinishedFile) {
  const std::string path = WriteFinishedRun("busy_setup");
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder, "PRAGMA journal_mode = DELETE; BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    sqlite3_exec(holder, "COMMIT", nullptr, nullptr, nullptr);
  });
  auto w = Writer::Open(path, LockOptions(3000, 3));
  release.join();
  sqlite3_close(holder);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->StartRun(RunRecord{}).ok());
  RecordSteps(**w, 0, 1);
  EXPECT_TRUE((*w)->EndRunAndCheck().ok());
}

TEST(Robust, ARunThatLostRowsToALockIsIncompleteNotFinished) {
  std::string path = TempDbPath("busy_lost");
  auto w = Writer::Open(path, LockOptions(20, 2));
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->StartRun(RunRecord{}).ok());
  RecordSteps(**w, 0, 2);
  (*w)->Flush();
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  RecordSteps(**w, 2, 1);  // 21 records, lost: the lock outlasts both attempts
  (*w)->Flush();
  sqlite3_exec(holder, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(holder);
  absl::Status st = (*w)->status();
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_TRUE(Contains(st, "locked")) << st;
  EXPECT_TRUE(Contains(st, "21 records lost after 2 attempts")) << st;
  EXPECT_EQ((*w)->records_lost(), 21);
  // Step 3 comes after the lost step 2: stored, it would leave a hole that
  // readers take for the run's steps (a full disk left steps 7-8 without
  // 0-6). It is dropped and counted; the run's end still goes in.
  RecordSteps(**w, 3, 1);
  (*w)->EndRun();
  w->reset();
  QueryResult run = MustQuery(path, "SELECT r.status, w.records_lost, w.note FROM runs r JOIN run_writers w USING (run_id)");
  EXPECT_EQ(run.Text(0, "status"), "incomplete");
  EXPECT_EQ(run.Int(0, "records_lost"), 42);
  EXPECT_EQ(run.Text(0, "note").rfind("42 records were not written (the first: ", 0), 0u) << run.Text(0, "note");
  EXPECT_EQ(MustQuery(path, "SELECT group_concat(step) AS s FROM steps").Text(0, "s"), "0,1");
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ReadRunState(*r, 1)->Describe().rfind("incomplete: 42 records were not written", 0), 0u)
      << ReadRunState(*r, 1)->Describe();
  EXPECT_TRUE(CheckDatabase(path).healthy());
}

// --- 7. check ---------------------------------------------------------------

std::string WriteFixture(const std::string& name) {
  std::string path = TempDbPath(name);
  auto w = Writer::Open(path);
  EXPECT_TRUE(w.ok());
  EXPECT_TRUE(shardscope::testing::WriteSyntheticRun(**w).ok());
  return path;
}

TEST(Robust, CheckPassesAWholeFileAndListsItsRuns) {
  std::string path = WriteFixture("check_ok");
  CheckReport c = CheckDatabase(path);
  EXPECT_TRUE(c.healthy()) << c.problems[0];
  ASSERT_EQ(c.runs.size(), 1u);
  EXPECT_EQ(c.runs[0], "run 1: mlp, finished");
}

TEST(Robust, CheckFindsBrokenReferencesAndStatuses) {
  std::string path = WriteFixture("check_refs");
  RawExec(path,
          "INSERT INTO slice_chunks(run_id, track_id, start_ns, end_ns, first_slice_id, count, slices)"
          " VALUES (1, 4242, 0, 1, 999999, 1, '[[0,1,1,0,0]]');"
          "UPDATE compilations SET graph_id = 777 WHERE compile_id = (SELECT min(compile_id) FROM compilations);"
          "PRAGMA foreign_keys = OFF; INSERT INTO hosts VALUES (9, 0, 'ghost');"
          "INSERT INTO runs(sample, mesh, mesh_axes, sharding, config_json, topology, profile, clock_kinds,"
          " tool_version, schema_version, num_hosts, num_devices, started_at, started_at_ns, status)"
          " VALUES ('x','1x1','a','dp','{}','t','cpu','host','0',1,1,1,'2024',0,'exploded');");
  CheckReport c = CheckDatabase(path);
  ASSERT_FALSE(c.healthy());
  std::string all;
  for (const auto& p : c.problems) all += p + "\n";
  EXPECT_NE(all.find("run 1: 1 slices on tracks that are not in `tracks`"), std::string::npos) << all;
  EXPECT_NE(all.find("run 1: 1 compilations of graphs that are not in `graphs`"), std::string::npos) << all;
  EXPECT_NE(all.find("1 rows of hosts -> runs refer to rows that do not exist"), std::string::npos) << all;
  EXPECT_NE(all.find("1 rows of `hosts` belong to no run in `runs`"), std::string::npos) << all;
  EXPECT_NE(all.find("run 2 has status 'exploded'"), std::string::npos) << all;
}

// A level-of-detail group whose text was edited by hand: `check` names the
// row, and the timeline's reads say the file is damaged instead of drawing it.
TEST(Robust, CheckNamesADamagedSummaryGroup) {
  std::string path = WriteFixture("check_groups");
  RawExec(path,
          "UPDATE slice_summary_groups SET buckets = '[[0,1,2,0,0,0,0,-1,0],[x]]'"
          " WHERE (run_id, level, first_bucket, track_id, depth) ="
          " (SELECT run_id, level, first_bucket, track_id, depth FROM slice_summary_groups"
          "  WHERE level = 0 ORDER BY first_bucket, track_id LIMIT 1);");
  CheckReport c = CheckDatabase(path);
  ASSERT_FALSE(c.healthy());
  std::string all;
  for (const auto& p : c.problems) all += p + "\n";
  EXPECT_NE(all.find("slice_summary_groups row (level 0, first bucket"), std::string::npos) << all;
  EXPECT_NE(all.find("is damaged: expected an integer"), std::string::npos) << all;
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  TimelineReader tl(*r);
  auto b = tl.AllSummaries(1, 0, INT64_MIN / 4, INT64_MAX / 4);
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(absl::IsDataLoss(b.status())) << b.status();
  EXPECT_NE(b.status().message().find("shardscope check"), std::string::npos) << b.status();
}

// Overwrites page `page` (1-based) of the file with junk.
void SmashPage(const std::string& path, int64_t page) {
  int64_t page_size = MustQuery(path, "PRAGMA page_size").Int(0, "page_size");
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp((page - 1) * page_size + 8);
  std::string junk(static_cast<size_t>(page_size - 16), '\x5a');
  f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
}

TEST(Robust, DamagedFilesAreCaughtAndNamed) {
  std::string path = WriteFixture("damaged");
  int64_t root = MustQuery(path, "SELECT rootpage FROM sqlite_master WHERE name = 'slice_chunks'").Int(0, "rootpage");
  ASSERT_GT(root, 1);
  SmashPage(path, root);
  CheckReport c = CheckDatabase(path);
  ASSERT_FALSE(c.healthy());
  EXPECT_NE(c.problems[0].find("SQLite integrity check"), std::string::npos) << c.problems[0];
  auto r = Reader::Open(path);  // the schema is fine: the damage shows when slices are read
  ASSERT_TRUE(r.ok()) << r.status();
  auto q = r->Query("SELECT count(*) FROM slices WHERE dur_ns > 0");
  ASSERT_FALSE(q.ok());
  EXPECT_TRUE(absl::IsDataLoss(q.status())) << q.status();
  EXPECT_TRUE(Contains(q.status(), path + " is damaged (")) << q.status();
  EXPECT_TRUE(Contains(q.status(), "run `shardscope check " + path + "` for details")) << q.status();
}

TEST(Robust, AnIndexThatDisagreesWithItsTableFailsCheck) {
  // Damage that plain reads do not notice (they answer, differently
  // depending on the plan): only the integrity check does.
  std::string path = WriteFixture("bad_index");
  int64_t root = MustQuery(path, "SELECT rootpage FROM sqlite_master WHERE name = 'slice_chunks_by_track_span'")
                     .Int(0, "rootpage");
  ASSERT_GT(root, 1);
  // Swap in the root page of another index: well-formed, wrong rows.
  RawExec(path, absl::StrCat("PRAGMA writable_schema = ON; UPDATE sqlite_master SET rootpage = (SELECT rootpage FROM"
                             " sqlite_master WHERE name = 'counters_by_name') WHERE name = 'slice_chunks_by_track_span';"));
  CheckReport c = CheckDatabase(path);
  EXPECT_FALSE(c.healthy());
}

}  // namespace
}  // namespace shardscope::store
