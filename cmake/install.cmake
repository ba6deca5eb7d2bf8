# `cmake --install build --prefix P`: what a program written outside this
# repository builds against (README, "Your own training program").
#   P/include/shardscope/   the public headers: core/shardscope.h and
#                           record/recording.h and what they include
#   P/lib/                  the static libraries a training program links
#   P/lib/cmake/shardscope/ find_package(shardscope): shardscope::shardscope
#   P/lib/pkgconfig/        shardscope.pc
#   P/bin/shardscope        the CLI, to read what a program recorded
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SHARDSCOPE_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/shardscope)
set(SHARDSCOPE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/shardscope)

# The public headers: core/shardscope.h, record/recording.h and every header
# of this repository they include, transitively. The install test builds a
# program against the installed tree alone, so a header missing here fails it.
set(SHARDSCOPE_PUBLIC_HEADERS
  core/shardscope.h core/auto_shard.h core/autocast.h core/autograd.h core/checkpoint.h
  core/compile.h core/context.h core/lazy.h core/mesh.h core/nn.h core/ops.h core/ops_cnn.h
  core/optim.h core/remat.h core/tensor.h
  record/recording.h
  compiler/auto_sharding.h compiler/buffer_assignment.h compiler/cost_model.h compiler/fusion.h
  compiler/ir.h compiler/literal.h compiler/sharding.h compiler/spmd.h compiler/types.h
  runtime/buffer.h runtime/client.h runtime/dispatch.h runtime/intra_op.h runtime/modeled_clock.h
  runtime/scheduler.h runtime/thread_pool.h runtime/topology.h runtime/interconnect.h runtime/mesh_mapping.h
  runtime/faults.h
  runtime/simulate.h
  profiler/trace/records.h profiler/trace/recorder.h profiler/trace/capture.h profiler/trace/sim_program.h)
foreach(header IN LISTS SHARDSCOPE_PUBLIC_HEADERS)
  get_filename_component(dir ${header} DIRECTORY)
  install(FILES ${header} DESTINATION ${SHARDSCOPE_INSTALL_INCLUDEDIR}/${dir})
endforeach()

# Everything a training program needs, in one target: shardscope::shardscope.
# -rdynamic: a recompilation's call site names the program's own functions
# (core finds them with dladdr), as it does for the samples in the CLI.
add_library(shardscope_package INTERFACE)
add_library(shardscope::shardscope ALIAS shardscope_package)
set_target_properties(shardscope_package PROPERTIES EXPORT_NAME shardscope)
target_link_libraries(shardscope_package INTERFACE shardscope_record shardscope_core)
target_compile_features(shardscope_package INTERFACE cxx_std_20)
target_link_options(shardscope_package INTERFACE $<INSTALL_INTERFACE:-rdynamic>)
# Libraries built with the sanitizers need their runtimes in the program too.
set(SHARDSCOPE_PC_LINK_OPTIONS -rdynamic)
if(SHARDSCOPE_SANITIZE)
  target_link_options(shardscope_package INTERFACE $<INSTALL_INTERFACE:-fsanitize=address,undefined>)
  string(APPEND SHARDSCOPE_PC_LINK_OPTIONS " -fsanitize=address,undefined")
endif()

set(SHARDSCOPE_PACKAGE_LIBRARIES
  shardscope_record shardscope_store shardscope_core shardscope_runtime shardscope_compiler
  shardscope_trace)
foreach(lib IN LISTS SHARDSCOPE_PACKAGE_LIBRARIES)
  string(REPLACE "shardscope_" "" short ${lib})
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${short})  # shardscope::core, ...
endforeach()
install(TARGETS shardscope_package ${SHARDSCOPE_PACKAGE_LIBRARIES}
        EXPORT shardscope-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${SHARDSCOPE_INSTALL_INCLUDEDIR})
install(TARGETS shardscope RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(EXPORT shardscope-targets NAMESPACE shardscope:: DESTINATION ${SHARDSCOPE_INSTALL_CMAKEDIR})
configure_package_config_file(cmake/shardscope-config.cmake.in
  ${CMAKE_BINARY_DIR}/shardscope-config.cmake
  INSTALL_DESTINATION ${SHARDSCOPE_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/shardscope-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/shardscope-config.cmake ${CMAKE_BINARY_DIR}/shardscope-config-version.cmake
        DESTINATION ${SHARDSCOPE_INSTALL_CMAKEDIR})

# pkg-config: the prefix is found from the .pc file's own place, so the tree
# works wherever `cmake --install --prefix` puts it.
file(RELATIVE_PATH SHARDSCOPE_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" SHARDSCOPE_PC_TO_PREFIX "${SHARDSCOPE_PC_TO_PREFIX}")
set(SHARDSCOPE_PC_DL_LIBS "")
foreach(lib IN LISTS CMAKE_DL_LIBS)
  string(APPEND SHARDSCOPE_PC_DL_LIBS " -l${lib}")
endforeach()
string(STRIP "${SHARDSCOPE_PC_DL_LIBS}" SHARDSCOPE_PC_DL_LIBS)
configure_file(cmake/shardscope.pc.in ${CMAKE_BINARY_DIR}/shardscope.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/shardscope.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
