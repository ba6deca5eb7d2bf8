// The schema text (store/schema.sql), embedded into the library at build time,
// and the version it describes. Writers apply it; readers check against it.
#pragma once

namespace shardscope::store {

// The full text of store/schema.sql: idempotent CREATE ... IF NOT EXISTS statements.
const char* SchemaSql();

// Version of the schema this build writes and the newest it can read.
inline constexpr int kSchemaVersion = 3;

}  // namespace shardscope::store
