// Test-only helper for the CLI tests: writes into DIR the synthetic run
// (fixture.db), a text file posing as a database (garbage.db), another
// tool's SQLite file (foreign.db) and a FIFO (fifo.db).
#include <sqlite3.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "store/writer.h"
#include "tests/store/synthetic_run.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_fixture DIR\n";
    return 2;
  }
  std::string dir = argv[1];
  for (const char* name : {"fixture.db", "foreign.db"}) {
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
