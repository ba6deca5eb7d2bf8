// The persistent compile cache (runtime/compile_cache.h): a second client
// with the same directory compiles nothing and runs the same program; a
// different option misses; a damaged entry — one flipped byte in any part,
// a truncation, another key — never loads: it is reported naming the file,
// removed and recompiled; a FIFO, a directory or a link at an entry's path is
// skipped without blocking and left alone; orphaned temporaries of dead
// writers are removed, a live writer's kept; an unusable directory is a
// clear error.
#include "runtime/compile_cache.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <optional>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "compiler/text.h"
#include "gtest/gtest.h"
#include "tests/temp_files.h"

namespace shardscope::runtime {
namespace {

using compiler::Instruction;
using compiler::Module;
using compiler::Opcode;

std::string FreshDir(const std::string& name) {
  const std::string dir =
      test_files::RemoveAtExit(::testing::TempDir() + "/compile_cache_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

std::unique_ptr<Client> MakeClient(const std::string& dir) {
  auto c = Client::Create({.num_hosts = 1, .chips_per_host = 2});
  EXPECT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE((*c)->SetCacheDir(dir).ok());
  return std::move(*c);
}

// x [rows, 3] split over two chips, summed over its rows: an all-reduce.
std::unique_ptr<Module> RowSum(int64_t rows = 4) {
  auto m = std::make_unique<Module>();
  Instruction* x = m->Parameter(Shape(DType::kF32, {rows, 3}), "x");
  x->sharding = *Sharding::Parse("{devices=[2,1]0,1}");
  m->AddOutput(m->Reduce(m->Unary(Opcode::kExponential, x), m->ScalarConstant(DType::kF32, 0), {0},
                         compiler::ReduceKind::kSum));
  return m;
}

std::vector<float> RunOnce(Client& c, const CompileResult& r, int64_t rows = 4) {
  std::vector<float> values(rows * 3);
  for (size_t k = 0; k < values.size(); ++k) values[k] = static_cast<float>(k) / 4;
  auto x =
      c.TransferToDevices(Literal::FromF32({rows, 3}, values), *Sharding::Parse("{devices=[2,1]0,1}"), "x");
  EXPECT_TRUE(x.ok()) << x.status();
  auto out = c.Execute(*r.executable, {&*x}, {});
  EXPECT_TRUE(out.ok()) << out.status();
  auto host = c.TransferToHost((*out)[0]);
  EXPECT_TRUE(host.ok()) << host.status();
  return host->ToF32Vector();
}

std::string ReadAll(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAll(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

// The only entry in `dir` (ASSERTs there is exactly one, and no temporary).
std::filesystem::path OnlyEntry(const std::string& dir) {
  std::vector<std::filesystem::path> entries;
  for (const auto& e : std::filesystem::directory_iterator(dir)) entries.push_back(e.path());
  EXPECT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries.empty() ? "" : entries[0].extension().string(), ".sscache");
  return entries.empty() ? std::filesystem::path() : entries[0];
}

// A fresh client in `dir` compiles RowSum(rows): the stored entry must not
// load — a miss whose disk_error names `entry` and says `why` — and the
// recompiled program must compute `expected`. Returns the disk_error.
std::string ExpectRecompiled(const std::string& dir, const std::filesystem::path& entry,
                             const std::string& why, const std::vector<float>& expected, int64_t rows = 4) {
  auto client = MakeClient(dir);
  auto r = client->Compile(*RowSum(rows));
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return "";
  EXPECT_EQ(r->cache, CacheOutcome::kMiss);
  EXPECT_TRUE(absl::StrContains(r->disk_error, absl::StrCat("compile cache entry ", entry.string(), ": ")))
      << r->disk_error;
  EXPECT_TRUE(absl::StrContains(r->disk_error, why)) << "expected '" << why << "' in: " << r->disk_error;
  EXPECT_TRUE(absl::StrContains(r->disk_error, "recompiled")) << r->disk_error;
  EXPECT_EQ(r->disk_error.find('\n'), std::string::npos) << r->disk_error;  // one line
  EXPECT_EQ(client->disk_cache()->unreadable(), 1);
  EXPECT_EQ(client->disk_cache()->hits(), 0);
  EXPECT_EQ(RunOnce(*client, *r, rows), expected);
  return r->disk_error;
}

TEST(CompileCacheTest, ASecondClientCompilesNothing) {
  const std::string dir = FreshDir("second");
  auto first = MakeClient(dir);
  auto a = first->Compile(*RowSum());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->cache, CacheOutcome::kMiss);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()),
            1);
  auto second = MakeClient(dir);
  auto b = second->Compile(*RowSum());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->cache, CacheOutcome::kDiskHit);
  EXPECT_EQ(second->disk_cache()->hits(), 1);
  EXPECT_EQ(compiler::PrintModule(*b->executable->program), compiler::PrintModule(*a->executable->program));
  EXPECT_EQ(b->executable->param_shardings, a->executable->param_shardings);
  EXPECT_EQ(b->executable->sharding.decisions.size(), a->executable->sharding.decisions.size());
  // Where each output's layout came from survives the disk: the row sum's is its input's.
  const auto& origins = a->executable->output_layout_origins;
  ASSERT_EQ(origins.size(), 1u);
  EXPECT_EQ(origins[0].param_index, 0);
  ASSERT_EQ(b->executable->output_layout_origins.size(), origins.size());
  EXPECT_EQ(b->executable->output_layout_origins[0].param_index, origins[0].param_index);
  EXPECT_EQ(b->executable->output_layout_origins[0].loc.line, origins[0].loc.line);
  EXPECT_EQ(RunOnce(*second, *b), RunOnce(*first, *a));
  // Within the process, the memory cache answers first.
  auto again = second->Compile(*RowSum());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->cache, CacheOutcome::kMemoryHit);
}

TEST(CompileCacheTest, AnotherOptionIsAMissNeverAStaleHit) {
  const std::string dir = FreshDir("options");
  auto fused = MakeClient(dir);
  ASSERT_TRUE(fused->Compile(*RowSum()).ok());
  auto unfused = MakeClient(dir);
  unfused->set_fusion(false);
  auto r = unfused->Compile(*RowSum());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cache, CacheOutcome::kMiss);
  auto profiled = MakeClient(dir);  // another target profile
  ASSERT_TRUE(profiled->SetProfile("tpu-v4").ok());
  auto p = profiled->Compile(*RowSum());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->cache, CacheOutcome::kMiss);
  auto four = Client::Create({.num_hosts = 2, .chips_per_host = 1});  // two chips, on two hosts
  ASSERT_TRUE(four.ok());
  ASSERT_TRUE((*four)->SetCacheDir(dir).ok());
  auto h = (*four)->Compile(*RowSum());
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->cache, CacheOutcome::kMiss);
}

TEST(CompileCacheTest, DamagedEntryIsRemovedAndRecompiled) {
  const std::string dir = FreshDir("damaged");
  auto first = MakeClient(dir);
  auto a = first->Compile(*RowSum());
  ASSERT_TRUE(a.ok());
  const auto entry = std::filesystem::directory_iterator(dir)->path();
  {
    std::ofstream out(entry, std::ios::trunc);
    out << "{\"version\": \"not json";
  }
  auto second = MakeClient(dir);
  auto b = second->Compile(*RowSum());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->cache, CacheOutcome::kMiss);
  EXPECT_TRUE(absl::StrContains(b->disk_error, absl::StrCat("compile cache entry ", entry.string(), ": ")))
      << b->disk_error;
  EXPECT_TRUE(absl::StrContains(b->disk_error, "not a compile cache entry")) << b->disk_error;
  EXPECT_EQ(second->disk_cache()->unreadable(), 1);
  EXPECT_EQ(RunOnce(*second, *b), RunOnce(*first, *a));
  auto third = MakeClient(dir);  // the entry was written again, whole
  auto c = third->Compile(*RowSum());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->cache, CacheOutcome::kDiskHit);
}

TEST(CompileCacheTest, UnusableDirectoryIsAClearError) {
  const std::string file = FreshDir("file");
  { std::ofstream(file) << "x"; }
  auto c = Client::Create({.num_hosts = 1, .chips_per_host = 1});
  ASSERT_TRUE(c.ok());
  absl::Status s = (*c)->SetCacheDir(file);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "is not a directory")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), file)) << s;
  auto direct = CompileCache::Open(file);
  ASSERT_FALSE(direct.ok());
  EXPECT_TRUE(absl::StrContains(direct.status().message(), "is not a directory")) << direct.status();
  auto missing = CompileCache::Open(file + "_missing");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "does not exist")) << missing.status();
  // A directory under a file cannot be created.
  s = (*c)->SetCacheDir(file + "/sub");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "cannot be created")) << s;
}

// One flipped byte anywhere — the header's magic, format version, sizes or
// checksum, the key, the program text, the layouts, the sharding rows — and
// the entry does not load. The program-text flip turns the reduce's init 0
// into 1: a loaded copy would run and give other numbers without a word.
TEST(CompileCacheTest, OneFlippedByteInAnyPartNeverLoads) {
  const std::string dir = FreshDir("flipped");
  auto first = MakeClient(dir);
  auto a = first->Compile(*RowSum());
  ASSERT_TRUE(a.ok()) << a.status();
  const std::vector<float> expected = RunOnce(*first, *a);
  const std::filesystem::path entry = OnlyEntry(dir);
  const std::string good = ReadAll(entry);
  const size_t eol = good.find('\n');
  ASSERT_NE(eol, std::string::npos);
  const std::string header = good.substr(0, eol);
  ASSERT_TRUE(absl::StartsWith(header, absl::StrCat(kEntryMagic, " ", kEntryFormatVersion, " "))) << header;
  const size_t key_at = eol + 1, key_end = good.find('\n', key_at);
  ASSERT_NE(key_end, std::string::npos);
  const std::string body = good.substr(key_end + 1);
  ASSERT_EQ(body.front(), '{');
  auto in_body = [&](const std::string& what, size_t skip, const std::string& after = "{") {
    const size_t at = good.find(what, good.find(after, key_end + 1));
    EXPECT_NE(at, std::string::npos) << what << " not in " << body;
    return at == std::string::npos ? good.size() - 1 : at + skip;
  };
  // The digit of the constant the partitioned program's reduce starts from.
  const size_t program_at = good.find("\"program\":", key_end);
  const size_t init_at = good.find("init: %", program_at);
  ASSERT_NE(init_at, std::string::npos) << body;
  const std::string init = good.substr(init_at + 6, good.find(')', init_at) - init_at - 6);
  const std::string constant = init + " = stablehlo.constant dense<0>";
  const size_t init_digit = good.find(constant, program_at) + constant.size() - 2;
  ASSERT_EQ(good[init_digit], '0') << body;
  {
    // Re-signed, the flipped program would load and compute other sums: only
    // the checksum stands between it and a silently different result.
    std::string resigned = good;
    resigned[init_digit] = '1';
    const size_t sum_end = resigned.find('\n');
    const std::string prefix = resigned.substr(0, resigned.rfind(' ', sum_end) + 1);
    const std::string rest = resigned.substr(sum_end + 1);
    XXH3_state_t* st = XXH3_createState();
    XXH3_128bits_reset(st);
    XXH3_128bits_update(st, prefix.data(), prefix.size());
    XXH3_128bits_update(st, rest.data(), rest.size());
    const XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    char hex[33];
    std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                  static_cast<unsigned long long>(h.low64));
    WriteAll(entry, prefix + hex + "\n" + rest);
    auto client = MakeClient(dir);
    auto r = client->Compile(*RowSum());
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->cache, CacheOutcome::kDiskHit) << r->disk_error;
    EXPECT_NE(RunOnce(*client, *r), expected);
    WriteAll(entry, good);
  }
  // Positions in the header: magic, version, key size, body size, checksum.
  const size_t version_at = std::string(kEntryMagic).size() + 1;
  const size_t key_size_at = header.find(' ', version_at) + 1;
  const size_t body_size_at = header.find(' ', key_size_at) + 1;
  const size_t sum_at = header.rfind(' ') + 1;
  const struct {
    const char* part;
    size_t at;
    const char* why;
  } flips[] = {
      {"header magic", 3, "not a compile cache entry"},
      {"header format version", version_at, "entry format version"},
      {"header key size", key_size_at, nullptr},  // the file is longer or shorter than it says
      {"header body size", body_size_at, nullptr},
      {"header checksum", sum_at + 5, "checksum mismatch (content damaged)"},
      {"key", key_at + (key_end - key_at) / 2, "checksum mismatch"},
      {"program text", init_digit, "checksum mismatch"},
      {"input layouts", in_body("param_shardings", 20), "checksum mismatch"},
      {"output shapes", in_body("output_shapes", 20), "checksum mismatch"},
      {"sharding rows", in_body("decisions", 14), "checksum mismatch"},
      {"last byte", good.size() - 1, "checksum mismatch"},
  };
  for (const auto& f : flips) {
    SCOPED_TRACE(f.part);
    std::string bad = good;
    ASSERT_LT(f.at, bad.size());
    bad[f.at] ^= 0x01;
    WriteAll(entry, bad);
    ExpectRecompiled(dir, entry,
                     f.why                    ? f.why
                     : bad[f.at] > good[f.at] ? "truncated"
                                              : "bytes after the end",
                     expected);
    // The damaged entry was removed and rewritten whole.
    EXPECT_EQ(ReadAll(entry), good);
  }
  // After all that, the rewritten entry loads.
  auto last = MakeClient(dir);
  auto c = last->Compile(*RowSum());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->cache, CacheOutcome::kDiskHit);
  EXPECT_TRUE(c->disk_error.empty()) << c->disk_error;
  EXPECT_EQ(RunOnce(*last, *c), expected);
}

TEST(CompileCacheTest, ATruncatedEntryNeverLoads) {
  const std::string dir = FreshDir("truncated");
  auto first = MakeClient(dir);
  auto a = first->Compile(*RowSum());
  ASSERT_TRUE(a.ok()) << a.status();
  const std::vector<float> expected = RunOnce(*first, *a);
  const std::filesystem::path entry = OnlyEntry(dir);
  const std::string good = ReadAll(entry);
  const size_t eol = good.find('\n'), key_end = good.find('\n', eol + 1);
  const struct {
    size_t length;
    std::string why;
  } cuts[] = {
      {0, "empty"},
      {1, "truncated inside its header"},
      {eol / 2, "truncated inside its header"},
      {eol, "truncated inside its header"},
      {eol + 1, "truncated"},
      {eol + 1 + (key_end - eol) / 2, "truncated"},
      {key_end + 1, "truncated"},
      {good.size() / 2, "truncated"},
      {good.size() - 1, absl::StrCat("truncated: ", good.size() - 1, " of ", good.size(), " bytes")},
  };
  for (const auto& c : cuts) {
    SCOPED_TRACE(absl::StrCat("cut at ", c.length, " of ", good.size()));
    WriteAll(entry, good.substr(0, c.length));
    ExpectRecompiled(dir, entry, c.why, expected);
    EXPECT_EQ(ReadAll(entry), good);
  }
  // A byte too many is damage too.
  WriteAll(entry, good + "x");
  ExpectRecompiled(dir, entry, "1 bytes after the end", expected);
  EXPECT_EQ(ReadAll(entry), good);
}

// A whole, well-formed entry copied to another key's name: the stored key
// differs, so it is not loaded for that key (x [8, 3] instead of [4, 3]).
TEST(CompileCacheTest, AnEntryStoredUnderAnotherKeyNeverLoads) {
  const std::string dir_a = FreshDir("key_a"), dir_b = FreshDir("key_b");
  auto ca = MakeClient(dir_a);
  ASSERT_TRUE(ca->Compile(*RowSum(4)).ok());
  auto cb = MakeClient(dir_b);
  auto b = cb->Compile(*RowSum(8));
  ASSERT_TRUE(b.ok());
  const std::vector<float> expected = RunOnce(*cb, *b, 8);
  const std::filesystem::path entry_a = OnlyEntry(dir_a), entry_b = OnlyEntry(dir_b);
  const std::string good_b = ReadAll(entry_b);
  WriteAll(entry_b, ReadAll(entry_a));
  ExpectRecompiled(dir_b, entry_b, "stored under another key", expected, 8);
  EXPECT_EQ(ReadAll(entry_b), good_b);
}

// Entries of an earlier format live under other names: never opened, a clean
// miss without a word, and left alone.
TEST(CompileCacheTest, AnOldFormatEntryIsACleanMiss) {
  const std::string dir = FreshDir("old_format");
  std::filesystem::create_directories(dir);
  const std::string old = dir + "/0123456789abcdef.sscache";
  WriteAll(old, "{\"version\": \"shardscope-spmd-9\", \"key\": \"x\"}");
  auto c = MakeClient(dir);
  auto r = c->Compile(*RowSum());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->cache, CacheOutcome::kMiss);
  EXPECT_TRUE(r->disk_error.empty()) << r->disk_error;
  EXPECT_EQ(c->disk_cache()->unreadable(), 0);
  EXPECT_TRUE(std::filesystem::exists(old));
}

// Compiles RowSum() in a fresh client on another thread and waits at most a
// deadline, so a read that blocks fails the test instead of hanging it.
// `unblock` is called if the deadline passes (it must let the read finish).
std::optional<CompileResult> CompileWithDeadline(const std::string& dir, const std::function<void()>& unblock,
                                                 std::unique_ptr<Client>* client) {
  *client = MakeClient(dir);
  Client* c = client->get();
  auto done = std::async(std::launch::async, [c] { return c->Compile(*RowSum()); });
  if (done.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "loading the entry blocked for 20 s";
    unblock();
    done.wait();
    return std::nullopt;
  }
  auto r = done.get();
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return std::nullopt;
  return *r;
}

TEST(CompileCacheTest, AFifoDirectoryOrLinkAtAnEntryPathIsSkippedNotBlockedOn) {
  const std::string dir = FreshDir("special");
  auto first = MakeClient(dir);
  auto a = first->Compile(*RowSum());
  ASSERT_TRUE(a.ok());
  const std::vector<float> expected = RunOnce(*first, *a);
  const std::filesystem::path entry = OnlyEntry(dir);
  const std::string good = ReadAll(entry);
  const std::string elsewhere = dir + "_target";
  WriteAll(elsewhere, good);

  const struct {
    const char* kind;
    std::function<void()> make;
    const char* why;
  } cases[] = {
      {"fifo", [&] { ASSERT_EQ(mkfifo(entry.c_str(), 0644), 0) << std::strerror(errno); }, "is a FIFO"},
      {"directory", [&] { std::filesystem::create_directory(entry); }, "is a directory"},
      {"symlink", [&] { std::filesystem::create_symlink(elsewhere, entry); }, "is a symbolic link"},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.kind);
    std::filesystem::remove_all(entry);
    k.make();
    std::unique_ptr<Client> client;
    auto r = CompileWithDeadline(
        dir,
        [&] {  // a writer end lets a blocked open of the FIFO return
          const int fd = ::open(entry.c_str(), O_WRONLY | O_NONBLOCK);
          if (fd >= 0) ::close(fd);
        },
        &client);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->cache, CacheOutcome::kMiss);
    EXPECT_TRUE(absl::StrContains(r->disk_error, absl::StrCat("compile cache entry ", entry.string(), ": ")))
        << r->disk_error;
    EXPECT_TRUE(absl::StrContains(r->disk_error, k.why)) << r->disk_error;
    EXPECT_TRUE(absl::StrContains(r->disk_error, "not overwritten")) << r->disk_error;
    EXPECT_EQ(client->disk_cache()->unreadable(), 1);
    EXPECT_EQ(RunOnce(*client, *r), expected);
    // Left in place, not written over.
    struct stat st;
    ASSERT_EQ(lstat(entry.c_str(), &st), 0);
    EXPECT_FALSE(S_ISREG(st.st_mode));
    EXPECT_EQ(ReadAll(elsewhere), good);
  }
  // No temporary left behind by the skipped writes.
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_FALSE(absl::StrContains(e.path().string(), ".tmp.")) << e.path();
  std::filesystem::remove_all(entry);
  std::filesystem::remove(elsewhere);
}

// A child process that is alive until killed; its pid.
pid_t LiveChild() {
  const pid_t pid = fork();
  if (pid == 0) {
    pause();
    _exit(0);
  }
  return pid;
}

// The pid of a process that has exited and been reaped.
pid_t DeadPid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

TEST(CompileCacheTest, OrphanedTemporariesOfDeadWritersAreRemovedLiveOnesKept) {
  const std::string dir = FreshDir("orphans");
  std::filesystem::create_directories(dir);
  const std::string entry = dir + "/00112233445566778899aabbccddeeff.sscache";
  const pid_t live = LiveChild(), dead = DeadPid();
  ASSERT_GT(live, 0);
  ASSERT_GT(dead, 0);
  const std::string of_dead = CompileCache::TempPathOf(entry, dead, 1);
  const std::string of_live = CompileCache::TempPathOf(entry, live, 2);
  const std::string of_self = CompileCache::TempPathOf(entry, getpid(), 3);
  const std::string of_old_live = CompileCache::TempPathOf(entry, live, 4);
  const std::string other_host = entry + ".tmp.some-other-host." + std::to_string(dead) + ".5";
  const std::string other_host_old = entry + ".tmp.some-other-host." + std::to_string(dead) + ".6";
  const std::string unrelated = dir + "/notes.tmp.1.2";
  for (const auto& p : {of_dead, of_live, of_self, of_old_live, other_host, other_host_old, unrelated})
    WriteAll(p, "partial");
  const auto long_ago =
      std::filesystem::file_time_type::clock::now() - kOrphanTempAge - std::chrono::minutes(5);
  std::filesystem::last_write_time(of_old_live, long_ago);
  std::filesystem::last_write_time(other_host_old, long_ago);

  auto cache = CompileCache::Open(dir);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_FALSE(std::filesystem::exists(of_dead)) << "its writer is gone";
  EXPECT_TRUE(std::filesystem::exists(of_live)) << "its writer, another process, is alive";
  EXPECT_TRUE(std::filesystem::exists(of_self));
  EXPECT_FALSE(std::filesystem::exists(of_old_live)) << "older than any write takes";
  EXPECT_TRUE(std::filesystem::exists(other_host)) << "another host's pid says nothing here";
  EXPECT_FALSE(std::filesystem::exists(other_host_old));
  EXPECT_TRUE(std::filesystem::exists(unrelated)) << "not a cache temporary";
  EXPECT_EQ((*cache)->orphans_removed(), 3);

  // Once the live writer dies, the next open removes its file.
  kill(live, SIGKILL);
  waitpid(live, nullptr, 0);
  auto again = CompileCache::Open(dir);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(std::filesystem::exists(of_live));
  EXPECT_TRUE(std::filesystem::exists(of_self));
  EXPECT_EQ((*again)->orphans_removed(), 1);
}

// A store leaves exactly one file: the entry, no temporary.
TEST(CompileCacheTest, AStoreLeavesNoTemporary) {
  const std::string dir = FreshDir("store");
  auto c = MakeClient(dir);
  ASSERT_TRUE(c->Compile(*RowSum(4)).ok());
  ASSERT_TRUE(c->Compile(*RowSum(8)).ok());
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(e.path().extension(), ".sscache") << e.path();
    ++entries;
  }
  EXPECT_EQ(entries, 2);
}

}  // namespace
}  // namespace shardscope::runtime
