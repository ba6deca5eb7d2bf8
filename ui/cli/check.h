// `shardscope check DB`: is the file whole (store/check.h)? Exit 0 healthy, 1 not, 2 bad usage.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace shardscope::cli {

extern const char kCheckHelp[];
int RunCheckCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace shardscope::cli
