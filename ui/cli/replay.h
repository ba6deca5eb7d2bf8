// `shardscope replay DB [--run N]`: a stored run re-executed on this build,
// and compared with the stored one (docs/diff.md, "Replay").
#pragma once

#include <string>
#include <vector>

namespace shardscope::cli {

extern const char kReplayHelp[];
int RunReplay(const std::vector<std::string>& args);

}  // namespace shardscope::cli
