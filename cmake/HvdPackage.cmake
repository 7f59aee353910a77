# Debian packages of hvd with CPack's DEB generator:   cpack --config <build>/CPackConfig.cmake
# (scripts/package.sh builds them and runs lintian on each; tests/packaging checks them).
#
# Component packages rather than one, because the nodes of a cluster and the machines that
# build against hvd need different things, as Debian splits any daemon-plus-library project:
#   hvd          hvdrun, hvdagent, libhvd.so.0 and the systemd units: what every node installs
#   hvd-dev      the public headers, the libhvd.so link and the CMake package (find_package(hvd))
#   python3-hvd  the hvd and horovod Python packages (Architecture: all, pure Python over libhvd)
#   hvd-mpi      libhvd's MPI plugin (only where MPI was found): kept out of hvd so that a node
#                without MPI does not pull Open MPI in through dpkg-shlibdeps
# Each depends on hvd of the same version (CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS).
#
# The packages install under /usr whatever this build's CMAKE_INSTALL_PREFIX is (cpack stages
# each component with the prefix replaced). What the ordinary install rules would get wrong for
# /usr is installed here by rules that only the packages use (EXCLUDE_FROM_ALL, so that
# `cmake --install` is unchanged): the Python packages in Debian's dist-packages with a
# _library.py that names /usr's libhvd, the systemd units with /usr/bin/hvdagent, and the
# copyright and changelog files every Debian package carries.

set(HVD_PACKAGE_MAINTAINER
    "Seed b926ad81 maintainers <maintainers@users.noreply.a-seed-b926ad81.example>"
    CACHE STRING "Maintainer field of the Debian packages (Name <address>)")
set(HVD_PACKAGE_RELEASE "1" CACHE STRING
    "Debian revision of the packages (their version is <project version>-<this>)")

set(hvd_pkg_prefix "/usr")
set(hvd_pkg_version "${PROJECT_VERSION}-${HVD_PACKAGE_RELEASE}")
set(hvd_pkg_build "${PROJECT_BINARY_DIR}/package")

# component -> package name. cpack_add_component and the CPACK_DEBIAN_<COMPONENT>_* variables
# below use the component; users see the package names.
set(hvd_pkg_components runtime dev python)
set(hvd_pkg_name_runtime hvd)
set(hvd_pkg_name_dev hvd-dev)
set(hvd_pkg_name_python python3-hvd)
if(TARGET hvd_mpi)
  list(APPEND hvd_pkg_components mpi)
  set(hvd_pkg_name_mpi hvd-mpi)
endif()

# --- Files only the packages carry -------------------------------------------------------------

# The Python packages, where Debian's python3 looks for packages of /usr
# (/usr/lib/python3/dist-packages), and the libhvd they load: the runtime package's soname file,
# which needs no -dev package.
file(GLOB_RECURSE hvd_pkg_python_sources CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}/python
     ${PROJECT_SOURCE_DIR}/python/hvd/*.py ${PROJECT_SOURCE_DIR}/python/horovod/*.py)
set(hvd_pkg_python_dir lib/python3/dist-packages)
foreach(source ${hvd_pkg_python_sources})
  get_filename_component(dir ${source} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/python/${source} DESTINATION ${hvd_pkg_python_dir}/${dir}
          COMPONENT python EXCLUDE_FROM_ALL)
endforeach()
file(GENERATE OUTPUT ${hvd_pkg_build}/python/_library.py CONTENT
     "# Written for the python3-hvd package: the libhvd these packages load (HVD_LIBRARY overrides it).\nPATH = \"${hvd_pkg_prefix}/${CMAKE_INSTALL_LIBDIR}/$<TARGET_SONAME_FILE_NAME:hvd>\"\n")
install(FILES ${hvd_pkg_build}/python/_library.py DESTINATION ${hvd_pkg_python_dir}/hvd
        COMPONENT python EXCLUDE_FROM_ALL)

# The systemd units with the packaged hvdagent. scripts/systemd keeps /usr/local/bin (cmake
# --install's default prefix) and ~/.local/bin for installs by hand; their install notes at the
# top are replaced by what applies to the package (README "Installing with Debian packages").
set(hvd_pkg_agent "${hvd_pkg_prefix}/${CMAKE_INSTALL_BINDIR}/hvdagent")
function(hvd_package_unit source output from header)
  file(READ ${PROJECT_SOURCE_DIR}/scripts/systemd/${source} text)
  string(FIND "${text}" "${from}" found)
  if(found EQUAL -1)
    message(FATAL_ERROR "scripts/systemd/${source} no longer runs ${from}: update HvdPackage.cmake")
  endif()
  string(REPLACE "${from}" "${hvd_pkg_agent}" text "${text}")
  string(REGEX REPLACE "^(#[^\n]*\n)+" "" text "${text}")
  file(WRITE ${hvd_pkg_build}/systemd/${output} "${header}${text}")
  set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
               ${PROJECT_SOURCE_DIR}/scripts/systemd/${source})
endfunction()
hvd_package_unit(hvdagent.service system/hvdagent.service "/usr/local/bin/hvdagent"
"# hvdagent for the whole node, from the hvd package (README \"Installing with Debian packages\").
# It runs as the user `hvd`, which the package does not create, with the cluster key at
# /home/hvd/.hvd/cluster.key (0600, owned by hvd). It listens on loopback until a drop-in sets
# the node's cluster address (systemctl edit hvdagent: an empty ExecStart= line, then this one
# with --listen changed). Start: systemctl enable --now hvdagent.
")
hvd_package_unit(hvdagent-user.service user/hvdagent.service "%h/.local/bin/hvdagent"
"# hvdagent as one user (systemctl --user enable --now hvdagent), from the hvd package.
# Needs the cluster key at ~/.hvd/cluster.key (0600); listens on loopback until a drop-in
# (systemctl --user edit hvdagent) gives --listen the node's cluster address;
# loginctl enable-linger keeps it running after logout.
")
install(FILES ${hvd_pkg_build}/systemd/system/hvdagent.service
        DESTINATION lib/systemd/system COMPONENT runtime EXCLUDE_FROM_ALL)
install(FILES ${hvd_pkg_build}/systemd/user/hvdagent.service
        DESTINATION lib/systemd/user COMPONENT runtime EXCLUDE_FROM_ALL)

# /usr/share/doc/<package>/{copyright,changelog.Debian.gz} in every package (Debian policy 12.5
# and 12.7; lintian's no-copyright-file and debian-changelog-file-missing are errors). The
# changelog's date is SOURCE_DATE_EPOCH's when set, so rebuilt packages are identical.
string(TIMESTAMP hvd_pkg_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
string(TIMESTAMP hvd_pkg_year "%Y" UTC)
set(hvd_pkg_copyright "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: hvd

Files: *
Copyright: ${hvd_pkg_year} the hvd authors
License: hvd-unspecified

License: hvd-unspecified
 The hvd sources carry no license statement yet; until they do, every right is
 reserved by the hvd authors, and these packages are for use inside the
 organisation that built them.
")
find_program(HVD_GZIP gzip)
foreach(component ${hvd_pkg_components})
  set(package ${hvd_pkg_name_${component}})
  set(doc ${hvd_pkg_build}/doc/${package})
  file(WRITE ${doc}/copyright "${hvd_pkg_copyright}")
  file(WRITE ${doc}/changelog.Debian
       "${package} (${hvd_pkg_version}) unstable; urgency=medium\n\n"
       "  * Package of hvd ${PROJECT_VERSION}, built by CPack (cmake/HvdPackage.cmake).\n\n"
       " -- ${HVD_PACKAGE_MAINTAINER}  ${hvd_pkg_date}\n")
  if(HVD_GZIP)
    # -n: no name or time stamp in the header (lintian: package-contains-timestamped-gzip).
    execute_process(COMMAND ${HVD_GZIP} -9 -n -c ${doc}/changelog.Debian
                    OUTPUT_FILE ${doc}/changelog.Debian.gz RESULT_VARIABLE failed)
  endif()
  if(NOT HVD_GZIP OR failed)
    message(WARNING "gzip failed or missing: the Debian packages lack changelog.Debian.gz")
  endif()
  install(FILES ${doc}/copyright ${doc}/changelog.Debian.gz DESTINATION share/doc/${package}
          COMPONENT ${component} EXCLUDE_FROM_ALL)
endforeach()

# dpkg runs ldconfig once per transaction for a package that declares this trigger (lintian's
# lacks-ldconfig-trigger is an error); CPack's own postinst and postrm call it directly besides.
file(WRITE ${hvd_pkg_build}/control/runtime/triggers "activate-noawait ldconfig\n")

# libhvd_mpi.so has no soname on purpose: it is a plugin that libhvd dlopens by path from its
# own directory (runtime/src/mpi/mpi_api.h), never linked against, so it must sit next to
# libhvd in /usr/lib although lintian expects only sonamed libraries there.
if(TARGET hvd_mpi)
  file(WRITE ${hvd_pkg_build}/lintian/hvd-mpi
       "# A dlopened plugin that libhvd looks for next to itself; nothing links it.\n"
       "hvd-mpi: sharedobject-in-library-directory-missing-soname\n")
  install(FILES ${hvd_pkg_build}/lintian/hvd-mpi DESTINATION share/lintian/overrides
          COMPONENT mpi EXCLUDE_FROM_ALL)
endif()

# --- CPack ---------------------------------------------------------------------------------------

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME hvd)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${HVD_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX ${hvd_pkg_prefix})
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL ${hvd_pkg_components})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING IGNORE)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # <package>_<version>-<release>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE ${HVD_PACKAGE_RELEASE})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${HVD_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)            # Depends from the ELF files' NEEDED entries
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)      # DEBIAN/shlibs for libhvd.so.0
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
# xz, as Debian's own packages; HVD_DEB_COMPRESSION (e.g. gzip) picks another at cpack time.
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
set(CPACK_PROJECT_CONFIG_FILE ${hvd_pkg_build}/CPackProjectConfig.cmake)
file(WRITE ${CPACK_PROJECT_CONFIG_FILE}
     "if(DEFINED ENV{HVD_DEB_COMPRESSION})\n"
     "  set(CPACK_DEBIAN_COMPRESSION_TYPE \$ENV{HVD_DEB_COMPRESSION})\n"
     "endif()\n")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME ${hvd_pkg_name_runtime})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION net)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${hvd_pkg_build}/control/runtime/triggers)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
"distributed training launcher, node agent and runtime library
hvd runs data-parallel training jobs across processes and hosts in the
manner of Horovod. This package holds hvdrun, the command that starts a
job; hvdagent, the daemon each node runs (with its systemd units) that
spawns and supervises a job's ranks without SSH; and libhvd, the library
the ranks use for ring allreduce and the other collectives over TCP,
shared memory and NCCL.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME ${hvd_pkg_name_dev})
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DEPENDS runtime)
set(CPACK_COMPONENT_DEV_DESCRIPTION
"distributed training runtime library (development files)
hvd runs data-parallel training jobs across processes and hosts in the
manner of Horovod. This package holds the C and C++ headers of libhvd and
its CMake package, for programs built with find_package(hvd) and linked
to hvd::hvd.")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME ${hvd_pkg_name_python})
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3")
set(CPACK_DEBIAN_PYTHON_PACKAGE_RECOMMENDS "python3-torch")
set(CPACK_COMPONENT_PYTHON_DEPENDS runtime)
set(CPACK_COMPONENT_PYTHON_DESCRIPTION
"distributed training runtime (Python 3 and PyTorch bindings)
hvd runs data-parallel training jobs across processes and hosts in the
manner of Horovod. This package holds the Python packages hvd and
hvd.torch over libhvd, and the horovod compatibility package, so that
scripts written for horovod.torch run under hvdrun unchanged.")

if(TARGET hvd_mpi)
  set(CPACK_DEBIAN_MPI_PACKAGE_NAME ${hvd_pkg_name_mpi})
  set(CPACK_DEBIAN_MPI_PACKAGE_SECTION net)
  set(CPACK_COMPONENT_MPI_DEPENDS runtime)
  set(CPACK_COMPONENT_MPI_DESCRIPTION
"distributed training runtime library (MPI plugin)
hvd runs data-parallel training jobs across processes and hosts in the
manner of Horovod. This package holds the plugin through which libhvd
runs under mpirun and uses MPI's collectives.")
endif()

include(CPack)
