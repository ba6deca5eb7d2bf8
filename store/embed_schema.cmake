# Writes the text of IN into OUT as a C++ raw string, shardscope::store::FUNC()
# (SchemaSql when FUNC is not given). Run at build time (cmake -P) so editing
# the .sql file rebuilds the library.
if(NOT FUNC)
  set(FUNC SchemaSql)
endif()
get_filename_component(source "${IN}" NAME)
file(READ "${IN}" text)
string(FIND "${text}" ")schema\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${source} contains the raw-string delimiter )schema\"")
endif()
file(WRITE "${OUT}.tmp"
  "// Generated from store/${source} by store/embed_schema.cmake; do not edit.\n"
  "#include \"store/schema.h\"\n"
  "namespace shardscope::store {\n"
  "const char* ${FUNC}() {\n  return R\"schema(${text})schema\";\n}\n"
  "}  // namespace shardscope::store\n")
# Only touch OUT when the text changed, so unrelated rebuilds stay quiet.
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
