// `shardscope diff A.db [B.db]`: two stored runs compared, with a CI gate
// (--fail-if-slower). Reads only the store.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace shardscope::cli {

extern const char kDiffHelp[];
// args exclude the program name and the command. Exit: 0 compared, 1 a file
// or run cannot be read, 2 bad arguments, 3 B is slower than the gate allows.
int RunDiffCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace shardscope::cli
