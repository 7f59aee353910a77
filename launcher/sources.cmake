# Host specifications (-H lists and hostfiles): pure parsing, tested in tests/unit.
add_library(hvd_launcher_core STATIC ${CMAKE_CURRENT_LIST_DIR}/host_spec.cc)
target_include_directories(hvd_launcher_core PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_launcher_core PUBLIC hvd PRIVATE hvd_warnings)
