// JSON as text for the database and the reports. Strings that reach it are
// bytes, not always UTF-8 (file names, a trace's names): a bad byte becomes
// U+FFFD instead of nlohmann throwing (type_error 316) and aborting a run or a
// report. Every dump of user-reachable text goes through here.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace shardscope::store {

// `indent` as nlohmann's dump: -1 one line, N spaces per level.
inline std::string JsonText(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace shardscope::store
