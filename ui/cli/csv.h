// CSV output for `shardscope query`: a header row, RFC 4180 quoting, NULL as an
// empty field and an empty string as "" (so the two stay apart). Records end in
// "\n" rather than RFC 4180's CRLF; every CSV reader accepts both.
#pragma once

#include <string>

#include "store/reader.h"

namespace shardscope::cli {

// Quotes a field when it is empty or holds a comma, quote, CR or LF (doubling inner quotes).
std::string CsvField(const std::string& s);
std::string ToCsv(const store::QueryResult& r);

}  // namespace shardscope::cli
