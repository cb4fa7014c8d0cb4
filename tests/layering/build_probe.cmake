# Builds one layering probe and checks the outcome: cmake -DBUILD_DIR=<dir> -DPROBE=<target>
# -DEXPECT=fail|pass [-DMISSING=<header>] -P build_probe.cmake. A probe expected to fail must fail
# for the reason given: its compiler names MISSING as not found.
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${PROBE}
                RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(EXPECT STREQUAL "pass")
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "probe ${PROBE} should compile but did not:\n${output}")
  endif()
  message(STATUS "probe ${PROBE} compiled, as it should")
  return()
endif()
if(result EQUAL 0)
  message(FATAL_ERROR "probe ${PROBE} compiled, but it includes ${MISSING} from a lower layer: "
                      "the layer include views (cmake/SeriemaLayers.cmake) no longer separate layers")
endif()
string(FIND "${output}" "${MISSING}: No such file" at)
if(at EQUAL -1)
  message(FATAL_ERROR "probe ${PROBE} failed, but not because ${MISSING} was hidden:\n${output}")
endif()
message(STATUS "probe ${PROBE} failed to compile, as it should: ${MISSING} not found")
