# Install rules, the CMake package (seriemaConfig.cmake), seriema.pc and the Debian package.
#
# cmake --install <build> [--prefix P] puts the headers, the static libraries, the tools (when
# built), seriemaConfig.cmake with its version file and targets (seriema::base, ::transfer,
# ::fabric, ::invoke, ::mcts, ::containers, ::pipe and ::seriema for all), seriema.pc, and the API
# reference when the docs target built it. Both files locate the prefix relative
# to themselves, so an installed tree can be moved. `cpack -G DEB` in the build directory makes
# the Debian package of the same tree (prefix /usr).
include(CMakePackageConfigHelpers)

set(SERIEMA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/seriema)
install(TARGETS seriema_base seriema_transfer seriema_fabric seriema_invoke seriema_mcts
                seriema_containers seriema_pipe seriema_group seriema_dsm seriema_offload seriema
        EXPORT seriemaTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/seriema DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_BINARY_DIR}/generated/seriema/version.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/seriema)
install(EXPORT seriemaTargets NAMESPACE seriema:: DESTINATION ${SERIEMA_CMAKE_DIR})
foreach(tool seriema-run seriema-info seriema-hex)
  if(TARGET ${tool})
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/README.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
# The API reference when it was built before installing (cmake --build <build> --target docs,
# cmake/SeriemaDocs.cmake): <prefix>/share/doc/seriema/api/index.html. Without it, nothing.
install(DIRECTORY ${PROJECT_BINARY_DIR}/docs/html/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/api
        OPTIONAL)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/seriemaConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/seriemaConfig.cmake
                              INSTALL_DESTINATION ${SERIEMA_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/seriemaConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/seriemaConfig.cmake
              ${PROJECT_BINARY_DIR}/seriemaConfigVersion.cmake
        DESTINATION ${SERIEMA_CMAKE_DIR})

# seriema.pc finds the prefix from its own directory (${pcfiledir}), like the CMake package.
file(RELATIVE_PATH SERIEMA_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
configure_file(${PROJECT_SOURCE_DIR}/cmake/seriema.pc.in ${PROJECT_BINARY_DIR}/seriema.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/seriema.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(CPACK_PACKAGE_NAME seriema)
set(CPACK_PACKAGE_VENDOR "seriema developers")
set(CPACK_PACKAGE_CONTACT "seriema developers <seriema@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Asynchronous remote invocation over RDMA (UCX): library, headers and tools")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
# The libraries are static: what a program linking them needs comes with the package.
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libucx-dev, libhwloc-dev, libpmix-dev, libfmt-dev, libcereal-dev, libconcurrentqueue-dev, pkg-config")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ucx-utils, openmpi-bin")
include(CPack)
