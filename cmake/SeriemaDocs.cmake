# The API reference: `cmake --build build --target docs` runs Doxygen over the public headers
# (docs/Doxyfile.in) into build/docs/html. SERIEMA_DOCS_WERROR (CI turns it on) makes any warning
# (an undocumented public type or function, a broken reference) fail the target.
option(SERIEMA_DOCS_WERROR "Fail the docs target on any Doxygen warning" OFF)
find_package(Doxygen QUIET)
set(SERIEMA_DOCS_OUTPUT ${PROJECT_BINARY_DIR}/docs)
set(SERIEMA_GENERATED_INCLUDE ${PROJECT_BINARY_DIR}/generated)
if(SERIEMA_DOCS_WERROR)
  set(SERIEMA_DOCS_WARN_AS_ERROR FAIL_ON_WARNINGS)
else()
  set(SERIEMA_DOCS_WARN_AS_ERROR NO)
endif()
configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile.in ${PROJECT_BINARY_DIR}/Doxyfile @ONLY)
if(DOXYGEN_FOUND)
  add_custom_target(docs
    COMMAND ${CMAKE_COMMAND} -E make_directory ${SERIEMA_DOCS_OUTPUT}
    COMMAND ${DOXYGEN_EXECUTABLE} ${PROJECT_BINARY_DIR}/Doxyfile
    COMMAND ${CMAKE_COMMAND} -E echo "API reference: ${SERIEMA_DOCS_OUTPUT}/html/index.html"
    WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
    COMMENT "Doxygen: the API reference of the public headers"
    VERBATIM)
else()
  add_custom_target(docs
    COMMAND ${CMAKE_COMMAND} -E echo "docs: Doxygen not found (apt-get install doxygen; scripts/install-deps.sh installs it)"
    COMMAND ${CMAKE_COMMAND} -E false
    VERBATIM)
endif()
