# The Debian packages (cmake/HvdPackage.cmake) built from this tree, unpacked into a temporary
# root, run a 2-rank job there with no file of the build tree; lintian, when installed, finds no
# error. Label e2e: it runs cpack and a real job. Needs the packaged targets built, dpkg-deb
# and, for the package dependencies, dpkg-shlibdeps (dpkg-dev); skipped (77) without them.
# Not in sanitizer builds: the ranks would load a libhvd that needs the sanitizer runtime first.
if(HVD_SANITIZE OR NOT (TARGET hvdrun AND TARGET hvdagent))
  return()
endif()
add_test(NAME packaging_deb
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_packages.sh ${PROJECT_BINARY_DIR})
set_tests_properties(packaging_deb PROPERTIES LABELS e2e TIMEOUT 300 SKIP_RETURN_CODE 77)
