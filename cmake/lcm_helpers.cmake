# Shared build settings: one warnings target, one test helper.

add_library(lcm_warnings INTERFACE)
target_compile_options(lcm_warnings INTERFACE
  $<$<COMPILE_LANG_AND_ID:CXX,GNU,Clang>:-Wall -Wextra -Wpedantic -Wshadow>
  $<$<COMPILE_LANG_AND_ID:CXX,GNU>:-Wno-restrict>)

# lcm_add_test(NAME SOURCES a.cpp b.cpp LIBS lcm::model [LABELS gpu])
function(lcm_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock lcm_warnings)
  target_compile_definitions(${name} PRIVATE
    LCM_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    LCM_BINARY_DIR="${CMAKE_BINARY_DIR}")
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${T_LABELS}")
endfunction()
