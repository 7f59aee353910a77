# The example trainer (examples/trainer): its math in-process, and
# data-parallel runs under hvdrun against the single-process large-batch reference.
if(TARGET hvd_trainer_model)
  hvd_test(NAME trainer_grad_test LABEL unit TIMEOUT 120
           SOURCES ${CMAKE_CURRENT_LIST_DIR}/../unit/trainer_grad_test.cc)
  target_link_libraries(trainer_grad_test PRIVATE hvd_trainer_model)
endif()

if(TARGET hvd-train AND TARGET hvdrun)
  hvd_test(NAME trainer_test LABEL mp TIMEOUT 300 SOURCES ${CMAKE_CURRENT_LIST_DIR}/trainer_test.cc)
  target_link_libraries(trainer_test PRIVATE hvd_trainer_model)
  target_compile_definitions(trainer_test PRIVATE HVDRUN_PATH="$<TARGET_FILE:hvdrun>"
                                                  HVD_TRAIN_PATH="$<TARGET_FILE:hvd-train>")
  add_dependencies(trainer_test hvdrun hvd-train)
endif()

# The engine's timeline, written by rank 0 of a real two-step training job.
if(TARGET hvd-train AND TARGET hvdrun)
  hvd_test(NAME trainer_timeline_test LABEL mp TIMEOUT 180
           SOURCES ${CMAKE_CURRENT_LIST_DIR}/trainer_timeline_test.cc)
  target_link_libraries(trainer_timeline_test PRIVATE hvd_test_support)
  target_compile_definitions(trainer_timeline_test PRIVATE HVDRUN_PATH="$<TARGET_FILE:hvdrun>"
                                                           HVD_TRAIN_PATH="$<TARGET_FILE:hvd-train>")
  add_dependencies(trainer_timeline_test hvdrun hvd-train)
endif()
