# Installs libhvd, its public headers and a CMake package so user projects can
#   find_package(hvd REQUIRED)  target_link_libraries(train PRIVATE hvd::hvd)
include(CMakePackageConfigHelpers)

# Components (runtime, dev, mpi) are the Debian packages' split (cmake/HvdPackage.cmake);
# `cmake --install` without --component installs them all.
install(TARGETS hvd EXPORT hvdTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# libhvd's MPI plugin (built where MPI was found) goes next to libhvd, where libhvd looks first.
if(TARGET hvd_mpi)
  install(TARGETS hvd_mpi LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT mpi)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/hvd
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(EXPORT hvdTargets NAMESPACE hvd:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hvd
        COMPONENT dev)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/hvdConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/hvdConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hvd)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/hvdConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/hvdConfig.cmake ${PROJECT_BINARY_DIR}/hvdConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hvd COMPONENT dev)

# The launcher and the node agent (scripts/systemd/hvdagent.service expects them in ${prefix}/bin).
# They find libhvd relative to themselves, in the build tree (bin/../lib) and installed
# (bin/../${CMAKE_INSTALL_LIBDIR}), so installing rewrites no RPATH.
foreach(tool hvdrun hvdagent)
  if(TARGET ${tool})
    set_target_properties(${tool} PROPERTIES
      BUILD_WITH_INSTALL_RPATH ON
      INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR};$ORIGIN/../lib")
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
  endif()
endforeach()
