// Test-only helper for the CLI tests: writes into DIR the synthetic run
// (fixture.db), three of them (multi.db: runs 1-3), the synthetic run with
// names holding terminal escapes, newlines, a C1 control and a byte that is
// not UTF-8 (hostile.db), a text file posing as a database (garbage.db),
// another tool's SQLite file (foreign.db) and a FIFO (fifo.db).
#include <sqlite3.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>

#include "store/writer.h"
#include "tests/store/synthetic_run.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_fixture DIR\n";
    return 2;
  }
  std::string dir = argv[1];
  for (const char* name : {"fixture.db", "foreign.db", "multi.db", "hostile.db"}) {
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::remove((dir + "/" + name + suffix).c_str());
    }
  }
  {
    auto w = shardscope::store::Writer::Open(dir + "/fixture.db");
    if (!w.ok()) {
      std::cerr << w.status() << "\n";
      return 1;
    }
    auto run = shardscope::testing::WriteSyntheticRun(**w);
    if (!run.ok()) {
      std::cerr << run.status() << "\n";
      return 1;
    }
  }
  for (const auto& [name, runs] : {std::pair<const char*, int>{"multi.db", 3}, {"hostile.db", 1}}) {
    auto w = shardscope::store::Writer::Open(dir + "/" + name);
    if (!w.ok()) {
      std::cerr << w.status() << "\n";
      return 1;
    }
    for (int k = 0; k < runs; ++k) {
      if (auto run = shardscope::testing::WriteSyntheticRun(**w); !run.ok()) {
        std::cerr << run.status() << "\n";
        return 1;
      }
    }
  }
  // Names as a hostile or broken program could have recorded them: ESC [2J
  // clears the screen, ESC ]0; sets the window title, CR rewrites the line,
  // U+009B is CSI on terminals that honour C1, X'9B' is not UTF-8.
  const char* kHostile =
      "UPDATE runs SET sample = 'ml' || char(27) || '[2Jp' || char(155) || '[2J' || char(10) || 'fake line';"
      "UPDATE tensors SET name = name || char(27) || '[2J' || char(10) || 'evil',"
      "  source_file = 'src' || char(27) || ']0;pwned' || char(7) || '.cc';"
      "UPDATE shard_placements SET tensor_name = tensor_name || char(27) || '[2J' || char(10) || 'evil';"
      "UPDATE compilations SET call_site = 'site' || char(27) || '[2J' || char(10) || 'x',"
      "  source_file = 'file' || char(27) || '[2J' || char(13) || '.cc',"
      "  cause_detail = 'detail ' || char(27) || '[31mred' || char(10) || 'next' || CAST(X'9B' AS TEXT)"
      "  WHERE cause_kind IS NOT NULL;"
      "UPDATE names SET name = name || char(27) || '[2J' || char(10) || 'evil';";
  sqlite3* h = nullptr;
  char* why = nullptr;
  if (sqlite3_open((dir + "/hostile.db").c_str(), &h) != SQLITE_OK ||
      sqlite3_exec(h, kHostile, nullptr, nullptr, &why) != SQLITE_OK) {
    std::cerr << "cannot write hostile.db: " << (why ? why : sqlite3_errmsg(h)) << "\n";
    return 1;
  }
  sqlite3_close(h);
  std::ofstream(dir + "/garbage.db") << "just some text, certainly not SQLite\n";
  sqlite3* db = nullptr;
  if (sqlite3_open((dir + "/foreign.db").c_str(), &db) != SQLITE_OK ||
      sqlite3_exec(db, "CREATE TABLE photos (id INTEGER, caption TEXT)", nullptr, nullptr,
                   nullptr) != SQLITE_OK) {
    std::cerr << "cannot write foreign.db\n";
    return 1;
  }
  sqlite3_close(db);
  std::remove((dir + "/fifo.db").c_str());
  if (mkfifo((dir + "/fifo.db").c_str(), 0600) != 0) {
    std::cerr << "cannot make fifo.db\n";
    return 1;
  }
  return 0;
}
