# Helpers to build a multi-process test executable and register launcher runs of it.
#
# seriema_mp_executable(<name> <source> <library>)
# seriema_mp_run(<test-name> EXE <name> NP <n> [MACHINES <m>] [TLS default|tcp] [TIMEOUT <s>]
#                [ARGS ...] [ENV VAR=value ...] [WILL_FAIL])
# seriema_mp_script_test(<test-base> SCRIPT <file> EXE <name> [TIMEOUT <s>])
#   <test-base>.default and <test-base>.tcp: runs <file> <seriema-run> <exe> once with the
#   default transports and once with UCX_TLS=tcp,self (scripts check a job's output).
function(seriema_mp_executable name source library)
  add_executable(${name} ${source})
  target_link_libraries(${name} PRIVATE ${library} GTest::gtest seriema_build_flags)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
endfunction()

function(seriema_mp_run test_name)
  cmake_parse_arguments(arg "WILL_FAIL" "EXE;NP;MACHINES;TLS;TIMEOUT" "ARGS;ENV" ${ARGN})
  if(NOT TARGET seriema-run)
    message(FATAL_ERROR "multi-process tests need the seriema-run target (tools/seriema_run/)")
  endif()
  set(launcher_args -n ${arg_NP})
  if(arg_MACHINES)
    list(APPEND launcher_args --machines ${arg_MACHINES})
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 300)
  endif()
  add_test(NAME ${test_name}
           COMMAND $<TARGET_FILE:seriema-run> ${launcher_args} -- $<TARGET_FILE:${arg_EXE}> ${arg_ARGS})
  set(env ${arg_ENV})
  if(arg_TLS STREQUAL "tcp")
    list(APPEND env "UCX_TLS=tcp,self")
  endif()
  set_tests_properties(${test_name} PROPERTIES LABELS multiproc TIMEOUT ${arg_TIMEOUT}
                       ENVIRONMENT "${env}")
  if(arg_WILL_FAIL)
    set_tests_properties(${test_name} PROPERTIES WILL_FAIL TRUE)
  endif()
endfunction()

function(seriema_mp_script_test test_base)
  cmake_parse_arguments(arg "" "SCRIPT;EXE;TIMEOUT" "" ${ARGN})
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 120)
  endif()
  foreach(tls default tcp)
    add_test(NAME ${test_base}.${tls}
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/${arg_SCRIPT} $<TARGET_FILE:seriema-run>
                     $<TARGET_FILE:${arg_EXE}>)
    set_tests_properties(${test_base}.${tls} PROPERTIES LABELS multiproc TIMEOUT ${arg_TIMEOUT})
  endforeach()
  set_tests_properties(${test_base}.tcp PROPERTIES ENVIRONMENT "UCX_TLS=tcp,self")
endfunction()
