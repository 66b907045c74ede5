lcm_add_test(lcm_io_tests
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/loader_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/bad_input_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/megatron_import_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/bundled_files_test.cpp
  LIBS lcm::model)
