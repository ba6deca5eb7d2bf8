// Reader tests: foreign, damaged, missing and too-new files are refused with
// a message that names the file; Query returns text cells, NULLs and binds params.
#include <sqlite3.h>

#include <fstream>

#include "gtest/gtest.h"
#include "store/reader.h"
#include "store/writer.h"
#include "tests/store/synthetic_run.h"

namespace shardscope::store {
namespace {

using shardscope::testing::TempDbPath;

void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

bool Contains(const absl::Status& st, const std::string& s) {
  return st.message().find(s) != std::string::npos;
}

TEST(ReaderTest, MissingFile) {
  std::string path = TempDbPath("missing");
  auto r = Reader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsNotFound(r.status()));
  EXPECT_TRUE(Contains(r.status(), path + ": no such file")) << r.status();
}

TEST(ReaderTest, ForeignSqliteFileIsRefusedByReaderAndWriter) {
  std::string path = TempDbPath("foreign");
  RawExec(path, "CREATE TABLE photos (id INTEGER, caption TEXT); INSERT INTO photos VALUES (1, 'cat');");
  auto r = Reader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            path + " is not a shardscope database (no 'meta' table); was it written by another tool?");
  auto w = Writer::Open(path);
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(Contains(w.status(), "is not a shardscope database")) << w.status();
  // The writer must not have touched the foreign file.
  RawExec(path, "CREATE TABLE check_untouched AS SELECT count(*) AS n FROM sqlite_master WHERE name = 'meta'");
}

TEST(ReaderTest, MetaFromAnotherToolIsRefused) {
  std::string path = TempDbPath("othertool");
  RawExec(path, "CREATE TABLE meta (key TEXT, value TEXT); INSERT INTO meta VALUES ('tool', 'perfetto');");
  auto r = Reader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status(), "names tool 'perfetto'")) << r.status();
}

TEST(ReaderTest, GarbageFileIsRefusedByReaderAndWriter) {
  std::string path = TempDbPath("garbage");
  {
    std::ofstream f(path, std::ios::binary);
    for (int i = 0; i < 200; ++i) f << "this is not a database, just text " << i << "\n";
  }
  auto r = Reader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status(), path + " is not an SQLite database")) << r.status();
  auto w = Writer::Open(path);
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(Contains(w.status(), "is not an SQLite database")) << w.status();
}

TEST(ReaderTest, EmptyFileIsNotAShardscopeDatabaseForTheReader) {
  std::string path = TempDbPath("empty");
  { std::ofstream f(path); }
  auto r = Reader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status(), "no 'meta' table")) << r.status();
  // ...but the writer may set an empty file up.
  auto w = Writer::Open(path);
  EXPECT_TRUE(w.ok()) << w.status();
}

TEST(ReaderTest, NewerSchemaIsRefused) {
  std::string path = TempDbPath("newer");
  { ASSERT_TRUE(Writer::Open(path).ok()); }
  RawExec(path, "UPDATE meta SET value = '7' WHERE key = 'schema_version'");
  auto r = Reader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status(), "schema version 7, newer than")) << r.status();
  auto w = Writer::Open(path);
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(Contains(w.status(), path)) << w.status();
}

TEST(ReaderTest, QueryCellsParamsAndErrors) {
  std::string path = TempDbPath("query");
  {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(shardscope::testing::WriteSyntheticRun(**w).ok());
  }
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok());
  auto q = r->Query("SELECT step, loss, NULL AS absent FROM steps WHERE step = ?1", {"3"});
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->rows.size(), 1u);
  EXPECT_EQ(q->columns, (std::vector<std::string>{"step", "loss", "absent"}));
  EXPECT_EQ(*q->rows[0][0], "3");
  EXPECT_EQ(*q->rows[0][1], "1.75");
  EXPECT_FALSE(q->rows[0][2].has_value());
  EXPECT_EQ(q->Int(0, "absent", -5), -5);
  EXPECT_EQ(q->Col("missing"), -1);

  auto t = r->Query("SELECT count(*) AS n FROM tensors WHERE name = ?1", {"l1.w"});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->Int(0, "n"), 1);

  EXPECT_TRUE(Contains(r->Query("SELEKT 1").status(), "SQL error"));
  EXPECT_TRUE(Contains(r->Query("SELECT 1; SELECT 2").status(), "one SQL statement"));
  EXPECT_FALSE(r->Query("   ").ok());
  EXPECT_TRUE(r->Query("SELECT 1;  ").ok());
  // The connection is read-only.
  auto del = r->Query("DELETE FROM steps");
  ASSERT_FALSE(del.ok());
  EXPECT_TRUE(Contains(del.status(), "readonly")) << del.status();
}

}  // namespace
}  // namespace shardscope::store
