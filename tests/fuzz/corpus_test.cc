// Replays every file under tests/fuzz/corpus through what the reader fuzz
// target does: inputs that once crashed or hung it stay fixed.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fuzz/read_any_file.h"

namespace {

TEST(ReaderFuzzCorpus, EveryInputReadsWithoutCrashing) {
  namespace fs = std::filesystem;
  const fs::path dir = SHARDSCOPE_FUZZ_CORPUS;
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  int inputs = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().filename() == "README.md") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(entry.path().string());
    shardscope::fuzz::ReadAnyBytes(bytes.data(), bytes.size());
    ++inputs;
  }
  EXPECT_GT(inputs, 0) << "the corpus is empty";
}

}  // namespace
