# hvd.torch's pytest suite (label python): every test file under tests/python runs on every
# rank of an hvdrun job at np 2 and np 3 (Debian's python3 with python3-torch and
# python3-pytest, PYTHONPATH=<build>/python), except test_process_sets.py, which runs alone in
# a job of np 4 (its sets need four ranks); launch/ runs once as a plain process that starts
# jobs of its own (srun-like ranks playing two nodes among them) and checks the packages'
# layering; elastic_jobs/ likewise runs once and starts elastic jobs. HVD_TIMELINE=DYNAMIC for
# the timeline test; a stall shuts down after 60 s instead of never (the default, Horovod's), so
# an op that some rank never submits fails the run well inside the ctest timeout.
find_program(HVD_TEST_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT HVD_TEST_PYTHON3)
  find_program(HVD_TEST_PYTHON3 NAMES python3)
endif()
set(suite ${CMAKE_CURRENT_LIST_DIR})
# What the build has, for the build queries' test to compare with (hvd.cuda_built()).
if(HVD_HAVE_NCCL)
  set(built_nccl 1)
else()
  set(built_nccl 0)
endif()
set(env "PYTHONPATH=${PROJECT_BINARY_DIR}/python:${suite}" "PYTHONDONTWRITEBYTECODE=1"
        "HVD_TIMELINE=DYNAMIC" "HVD_STALL_SHUTDOWN_TIME=60" "HVD_PYTEST_HVDRUN=$<TARGET_FILE:hvdrun>"
        "HVD_TEST_BUILT_NCCL=${built_nccl}")
foreach(np 2 3)
  add_test(NAME python_np${np}
           COMMAND $<TARGET_FILE:hvdrun> -np ${np} ${HVD_TEST_PYTHON3} -m pytest -q
                   -p no:cacheprovider --ignore=${suite}/launch --ignore=${suite}/elastic_jobs
                   --ignore=${suite}/test_process_sets.py ${suite}
           WORKING_DIRECTORY ${suite})
  set_tests_properties(python_np${np} PROPERTIES LABELS python TIMEOUT 900
                       ENVIRONMENT "${env}")
endforeach()
add_test(NAME python_process_sets_np4
         COMMAND $<TARGET_FILE:hvdrun> -np 4 ${HVD_TEST_PYTHON3} -m pytest -q -p no:cacheprovider
                 ${suite}/test_process_sets.py
         WORKING_DIRECTORY ${suite})
set_tests_properties(python_process_sets_np4 PROPERTIES LABELS python TIMEOUT 300
                     ENVIRONMENT "${env}")
add_test(NAME python_launch
         COMMAND ${HVD_TEST_PYTHON3} -m pytest -q -p no:cacheprovider ${suite}/launch
         WORKING_DIRECTORY ${suite})
set_tests_properties(python_launch PROPERTIES LABELS python TIMEOUT 300
                     ENVIRONMENT "${env};HVD_PYTEST_LAUNCHER=1")
# Elastic jobs (plain process, like launch/): each test starts an elastic hvdrun job of its own
# whose hosts are names of this machine, fails workers and changes the discovered hosts.
add_test(NAME python_elastic_jobs
         COMMAND ${HVD_TEST_PYTHON3} -m pytest -q -p no:cacheprovider ${suite}/elastic_jobs
         WORKING_DIRECTORY ${suite})
set_tests_properties(python_elastic_jobs PROPERTIES LABELS python TIMEOUT 600
                     ENVIRONMENT "${env};HVD_PYTEST_LAUNCHER=1")
