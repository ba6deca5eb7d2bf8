// The schema text (store/schema.sql), embedded into the library at build time,
// and the version it describes. Writers apply it; readers check against it.
#pragma once

namespace shardscope::store {

// The full text of store/schema.sql: idempotent CREATE ... IF NOT EXISTS statements.
const char* SchemaSql();

// The full text of store/view_triggers.sql: the triggers that let the views
// shard_placements and sharding_decisions be written as the tables they were
// before version 4. Applied once a file has those views.
const char* ViewTriggersSql();

// Version of the schema this build writes and the newest it can read.
inline constexpr int kSchemaVersion = 4;

}  // namespace shardscope::store
