# Runs the chimera binary and checks how it ended:
#   cmake -DBINARY=... -DARGS="a|b|c" -DSTATUS=2 -DEXPECT="text" [-DSTREAM=stderr|stdout] -P run_cli.cmake
# STATUS is the exit status required. With STATUS != 0, stderr must be exactly one line
# containing EXPECT and stdout must be empty; with STATUS 0, STREAM (default stdout) must
# contain EXPECT.
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND ${BINARY} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc STREQUAL STATUS)
  message(FATAL_ERROR "chimera ${args}: exit status ${rc}, expected ${STATUS}\nstdout: ${out}\nstderr: ${err}")
endif()
if(NOT STATUS EQUAL 0)
  string(REGEX MATCHALL "\n" newlines "${err}")
  list(LENGTH newlines lines)
  if(NOT lines EQUAL 1 OR NOT out STREQUAL "")
    message(FATAL_ERROR "chimera ${args}: expected one line on stderr and nothing on stdout\nstdout: ${out}\nstderr: ${err}")
  endif()
  set(text "${err}")
elseif(STREAM STREQUAL "stderr")
  set(text "${err}")
else()
  set(text "${out}")
endif()
string(FIND "${text}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "chimera ${args}: output lacks '${EXPECT}':\n${text}")
endif()
