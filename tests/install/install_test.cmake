# A program written outside this repository, as the README shows it: install
# this build into a fresh prefix, build tests/install/user_program against it
# with find_package(shardscope) and again with pkg-config and g++, run both,
# and check what they recorded with the installed `shardscope` CLI.
#
# cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK=... -DGENERATOR=... -DCXX=... -DLIBDIR=lib
#       [-DLAUNCHER=ccache] -P install_test.cmake
foreach(var BUILD_DIR SOURCE_DIR WORK GENERATOR CXX LIBDIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_test.cmake: -D${var}=... is required")
  endif()
endforeach()

set(PROGRAM ${SOURCE_DIR}/tests/install/user_program)
set(PREFIX ${WORK}/prefix)
set(CLI ${PREFIX}/bin/shardscope)

# run(DIR ARGS...): runs ARGS in DIR, fails the test with its output unless it
# exits 0; its stdout is left in OUT.
function(run dir)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${dir} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n--- stdout\n${out}\n--- stderr\n${err}${HINT}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
endfunction()

function(expect what text regex)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: expected to match\n  ${regex}\ngot\n${text}")
  endif()
endfunction()

# The README shows the program and its CMakeLists.txt exactly as they are here.
file(READ ${SOURCE_DIR}/README.md readme)
foreach(file main.cc CMakeLists.txt)
  file(READ ${PROGRAM}/${file} text)
  string(FIND "${readme}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "README.md does not show tests/install/user_program/${file} as it is; copy it "
                        "into the section \"Your own training program\"")
  endif()
endforeach()

# The line of main.cc that cuts the step: the compilations are stored there.
file(STRINGS ${PROGRAM}/main.cc lines)
set(mark_step_line 0)
set(n 0)
foreach(line IN LISTS lines)
  math(EXPR n "${n} + 1")
  if(line MATCHES "ss::mark_step\\(\\)")
    set(mark_step_line ${n})
  endif()
endforeach()
if(mark_step_line EQUAL 0)
  message(FATAL_ERROR "main.cc has no ss::mark_step() line")
endif()

# Checks the run a program recorded into DB, the way a user would look at it.
function(check_db db)
  run(${WORK} ${CLI} report ${db})
  expect("shardscope report ${db}" "${OUT}" "run 1: my_mlp, 5 steps, mesh 2x2 \\(data, model\\)")
  run(${WORK} ${CLI} query ${db} "SELECT status, num_devices, sample FROM runs")
  expect("the runs row" "${OUT}" "^status,num_devices,sample\nfinished,4,my_mlp\n$")
  run(${WORK} ${CLI} query ${db} "SELECT COUNT(*) AS n, MIN(loss) > 0 AS positive FROM steps")
  expect("the steps" "${OUT}" "^n,positive\n5,1\n$")
  run(${WORK} ${CLI} query ${db} "SELECT coords FROM devices ORDER BY device_id")
  expect("the devices" "${OUT}" "^coords\n\"\\[0,0\\]\"\n\"\\[0,1\\]\"\n\"\\[1,0\\]\"\n\"\\[1,1\\]\"\n$")
  # The first compilation is the first graph at the program's mark_step line, named
  # by the program's own file; its call site names the program's own function.
  run(${WORK} ${CLI} query ${db}
      "SELECT source_file, source_line, cause_kind, call_site FROM compilations ORDER BY compile_id LIMIT 1")
  expect("the first compilation" "${OUT}" "\nmain.cc,${mark_step_line},first_compile,[^\n]* <- main")
  run(${WORK} ${CLI} query ${db} "SELECT COUNT(*) AS other FROM compilations WHERE source_file <> 'main.cc'")
  expect("compilations elsewhere" "${OUT}" "^other\n0\n$")
  run(${WORK} ${CLI} query ${db} "SELECT COUNT(*) > 0 AS stored FROM metrics")
  expect("the metrics written when the run ended" "${OUT}" "^stored\n1\n$")
endfunction()

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/cmake-run ${WORK}/pkg-config-run)
run(${WORK} ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})

# 1. find_package(shardscope): the installed tree only (no package registry,
#    no build tree), the program's CMakeLists.txt as the README shows it.
set(launcher)
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
run(${WORK} ${CMAKE_COMMAND} -S ${PROGRAM} -B ${WORK}/cmake-build -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_CXX_COMPILER=${CXX} ${launcher} -DCMAKE_PREFIX_PATH=${PREFIX}
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
set(HINT "\n(a header the public headers include that is not installed? list it in SHARDSCOPE_PUBLIC_HEADERS, "
         "cmake/install.cmake)")
run(${WORK} ${CMAKE_COMMAND} --build ${WORK}/cmake-build)
set(HINT)
run(${WORK}/cmake-run ${WORK}/cmake-build/my_mlp)
expect("my_mlp" "${OUT}" "step 4  loss [0-9.]+\nrecorded run 1 into run.db")
check_db(${WORK}/cmake-run/run.db)

# 2. pkg-config: the same program, compiled and linked by hand.
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} ${PREFIX}/${LIBDIR}/pkgconfig)
run(${WORK} ${PKG_CONFIG} --cflags --libs shardscope)
string(STRIP "${OUT}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
set(compiler ${CXX})
if(LAUNCHER)
  set(compiler ${LAUNCHER} ${CXX})
endif()
run(${WORK} ${compiler} -std=c++20 -O1 ${PROGRAM}/main.cc -o ${WORK}/my_mlp_pc ${flags})
run(${WORK}/pkg-config-run ${WORK}/my_mlp_pc)
check_db(${WORK}/pkg-config-run/run.db)
