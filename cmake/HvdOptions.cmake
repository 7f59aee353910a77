# Build options of hvd and the warning/sanitizer flags every target gets through hvd_warnings.
set(HVD_WITH_NCCL "AUTO" CACHE STRING "Build the NCCL backend: AUTO, ON or OFF")
set_property(CACHE HVD_WITH_NCCL PROPERTY STRINGS AUTO ON OFF)
set(HVD_WITH_MPI "AUTO" CACHE STRING "Build Open MPI support (and the MPI peer benchmark): AUTO, ON or OFF")
set_property(CACHE HVD_WITH_MPI PROPERTY STRINGS AUTO ON OFF)
# OFF; ON or "address": AddressSanitizer + UndefinedBehaviorSanitizer; "thread": ThreadSanitizer.
set(HVD_SANITIZE OFF CACHE STRING "Sanitizers: OFF, ON/address (ASan+UBSan) or thread (TSan)")
set_property(CACHE HVD_SANITIZE PROPERTY STRINGS OFF ON address thread)
option(HVD_BUILD_TESTS "Build the test suite" ON)

add_library(hvd_warnings INTERFACE)
target_compile_options(hvd_warnings INTERFACE -Wall -Wextra -Wno-unused-parameter)

if(HVD_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(HVD_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
