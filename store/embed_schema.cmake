# Writes the text of IN into OUT as a C++ raw string, shardscope::store::SchemaSql().
# Run at build time (cmake -P) so editing schema.sql rebuilds the library.
file(READ "${IN}" text)
string(FIND "${text}" ")schema\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "schema.sql contains the raw-string delimiter )schema\"")
endif()
file(WRITE "${OUT}.tmp"
  "// Generated from store/schema.sql by store/embed_schema.cmake; do not edit.\n"
  "#include \"store/schema.h\"\n"
  "namespace shardscope::store {\n"
  "const char* SchemaSql() {\n  return R\"schema(${text})schema\";\n}\n"
  "}  // namespace shardscope::store\n")
# Only touch OUT when the text changed, so unrelated rebuilds stay quiet.
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
