include(GoogleTest)

# chimera_add_unit_test(NAME SOURCES... LIBS...) : a serial GoogleTest executable.
function(chimera_add_unit_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  chimera_keep_libraries_loaded(${name})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main chimera_warnings)
  target_compile_definitions(${name} PRIVATE CHIMERA_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit TIMEOUT 300)
endfunction()

# Launcher flags for Open MPI on a small shared machine: more ranks than cores, and root in
# containers. MPICH ignores neither, so they are only added for Open MPI.
set(CHIMERA_MPIEXEC_FLAGS "")
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _mpiexec_version ERROR_QUIET)
if(_mpiexec_version MATCHES "Open MPI|OpenRTE")
  list(APPEND CHIMERA_MPIEXEC_FLAGS --oversubscribe)
  execute_process(COMMAND id -u OUTPUT_VARIABLE _uid OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_uid STREQUAL "0")
    list(APPEND CHIMERA_MPIEXEC_FLAGS --allow-run-as-root)
  endif()
endif()
set(CHIMERA_MPIEXEC_FLAGS ${CHIMERA_MPIEXEC_FLAGS} CACHE INTERNAL "")

# Under AddressSanitizer, multi-process tests go through a wrapper that reruns a test once when
# LeakSanitizer's tracer itself crashed at exit with no finding (see the script for why).
set(CHIMERA_TEST_LAUNCHER "")
if(CHIMERA_SANITIZE MATCHES "address")
  set(CHIMERA_TEST_LAUNCHER ${PROJECT_SOURCE_DIR}/tests/sanitizers/rerun-on-tracer-crash)
endif()

# chimera_add_mpi_test(NAME SOURCES... LIBS... RANKS 1 2 4 [TIMEOUT s])
# One GoogleTest executable run under mpiexec once per rank count (test names NAME.np<k>).
# tests/mpi/mpi_test_main.cpp initialises MPI and aborts the whole job on a hang.
function(chimera_add_mpi_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS;RANKS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${name} ${ARG_SOURCES} ${PROJECT_SOURCE_DIR}/tests/mpi/mpi_test_main.cpp)
  chimera_keep_libraries_loaded(${name})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest MPI::MPI_CXX chimera_core chimera_warnings)
  target_compile_definitions(${name} PRIVATE CHIMERA_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/mpi ${PROJECT_SOURCE_DIR}/tests/support)
  # The binary's own hang watchdog (mpi_test_main.cpp) fires shortly before ctest's timeout, so
  # a slow run (sanitizers) gets the whole timeout and a hang still ends with its message.
  math(EXPR deadline "${ARG_TIMEOUT} - 20")
  foreach(np IN LISTS ARG_RANKS)
    add_test(NAME ${name}.np${np}
             COMMAND ${CHIMERA_TEST_LAUNCHER} ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np}
                     ${CHIMERA_MPIEXEC_FLAGS}
                     ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${name}> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(${name}.np${np} PROPERTIES LABELS mpi TIMEOUT ${ARG_TIMEOUT}
                         PROCESSORS ${np}
                         ENVIRONMENT "OMP_NUM_THREADS=1;CHIMERA_TEST_DEADLINE_S=${deadline}")
  endforeach()
endfunction()

# chimera_add_train_driver_test(NAME SCRIPT PROCESSORS n TIMEOUT s [LABELS ...] [ARGS ...]
#                               [SKIP_REGEX re])
# A Python driver that launches `chimera train` (and its other subcommands) the way a user does,
# under mpiexec with this machine's launcher flags: SCRIPT CHIMERA MPIEXEC FLAGS... [ARGS...].
# SKIP_REGEX: output that means the driver could not do its work, which CTest reports as a skip.
function(chimera_add_train_driver_test name)
  cmake_parse_arguments(ARG "" "SCRIPT;PROCESSORS;TIMEOUT;SKIP_REGEX" "LABELS;ARGS" ${ARGN})
  if(NOT ARG_LABELS)
    set(ARG_LABELS mpi)
  endif()
  add_test(NAME ${name}
           COMMAND ${CHIMERA_TEST_LAUNCHER} /usr/bin/python3 ${ARG_SCRIPT} $<TARGET_FILE:chimera> ${MPIEXEC_EXECUTABLE}
                   ${CHIMERA_MPIEXEC_FLAGS} ${ARG_ARGS})
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
                       PROCESSORS ${ARG_PROCESSORS})
  if(ARG_SKIP_REGEX)
    set_tests_properties(${name} PROPERTIES SKIP_REGULAR_EXPRESSION "${ARG_SKIP_REGEX}")
  endif()
endfunction()
