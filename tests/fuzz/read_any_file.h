// What the reader fuzz target does with one input, shared with the ordinary
// test that replays the corpus (tests/fuzz/corpus) so every input that once
// crashed stays a regression test: the bytes become a file, and the reader,
// the run states, `check` and every report read it. Errors are fine; a crash,
// a hang or a sanitizer report is the bug.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace shardscope::fuzz {

// Reads the database at `path` the way the CLI's commands do.
void ReadAnyFile(const std::string& path);
// Writes `data` to a scratch file of this process and reads it.
void ReadAnyBytes(const uint8_t* data, size_t size);

}  // namespace shardscope::fuzz
