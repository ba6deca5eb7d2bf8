// What the reader fuzz target does with one input, shared with the ordinary
// test that replays the corpus (tests/fuzz/corpus) so every input that once
// crashed stays a regression test: the bytes become a file, and the reader,
// the run states, `check` and every report read it; then the same bytes are
// imported as a Chrome trace (`shardscope import`) and the run it makes is
// read the same way. Errors are fine; a crash, a hang or a sanitizer report
// is the bug.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace shardscope::fuzz {

// Reads the database at `path` the way the CLI's commands do.
void ReadAnyFile(const std::string& path);
// Imports `data` as a Chrome trace file (shardscope import) into a scratch
// database and, when that works, reads the database as above.
void ImportAnyBytes(const uint8_t* data, size_t size);
// Writes `data` to a scratch file of this process and reads it, then imports
// it as a trace: one target covers the reader and the importer.
void ReadAnyBytes(const uint8_t* data, size_t size);

}  // namespace shardscope::fuzz
