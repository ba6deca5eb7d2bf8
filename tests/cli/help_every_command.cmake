# `--help` on every command: each command `shardscope --help` lists answers
# `shardscope CMD --help`, `CMD -h` and `help CMD` with exit 0 and its usage
# line, and the list names the exit codes. BIN: the shardscope binary.

# Runs shardscope with ARGN; fails unless it exits 0; its stdout in `var`.
function(run_ok var)
  execute_process(COMMAND ${BIN} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "shardscope ${ARGN} exited ${rc}:\n${out}${err}")
  endif()
  set(${var} "${out}" PARENT_SCOPE)
endfunction()

run_ok(top --help)
if(NOT top MATCHES "exit codes: 0 ok, 1 [^\n]*\n?[^\n]*2 bad usage[^\n]*\n?[^\n]*3 a gate tripped")
  message(FATAL_ERROR "shardscope --help does not state the exit codes 0, 1, 2 and 3:\n${top}")
endif()
# The commands: the lines "  NAME ARGS  what it does" after "commands:".
string(FIND "${top}" "commands:" at)
string(SUBSTRING "${top}" ${at} -1 listed)
string(REGEX MATCHALL "\n  [a-z]+ " found "${listed}")
set(commands "")
foreach(line ${found})
  string(STRIP "${line}" name)
  list(APPEND commands ${name})
endforeach()
list(LENGTH commands n)
if(n LESS 12)
  message(FATAL_ERROR "found only ${n} commands (${commands}) in:\n${top}")
endif()
foreach(cmd ${commands})
  foreach(form "${cmd};--help" "${cmd};-h" "help;${cmd}")
    run_ok(out ${form})
    if(NOT out MATCHES "^usage: shardscope ${cmd}[ \n]")
      message(FATAL_ERROR "shardscope ${form} does not start with 'usage: shardscope ${cmd}':\n${out}")
    endif()
  endforeach()
endforeach()
message(STATUS "--help answers for ${n} commands: ${commands}")
