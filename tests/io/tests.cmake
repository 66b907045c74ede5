lcm_add_test(lcm_io_tests
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/loader_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/bad_input_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/validate_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/roundtrip_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/hardware_profile_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/enums_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/megatron_functional_tests_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/megatron_import_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/megatron_flags_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/bundled_files_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/limits_test.cpp
  LIBS lcm::model)
# megatron_flags_test reads the importer's private headers.
target_include_directories(lcm_io_tests PRIVATE ${PROJECT_SOURCE_DIR}/model/io)
target_link_libraries(lcm_io_tests PRIVATE yaml-cpp)
