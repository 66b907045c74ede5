# lcm_planner_tests: the layout planner (plan, sweep, comm), its equality with fresh
# estimates, its formats and its command line.
lcm_add_test(lcm_planner_tests
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/plan_equality_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/plan_logic_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/plan_format_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/plan_cli_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/calibrate_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/compare_test.cpp  # lcm compare: planted-perturbation fixture, CLI
    ${CMAKE_CURRENT_LIST_DIR}/ties_test.cpp  # issue 12 (wt-bands): error-band ties
  LIBS lcm::planner lcm::cli nlohmann_json::nlohmann_json)
add_dependencies(lcm_planner_tests lcm)
