# lcm-gui tests (QtTest), included from tests/CMakeLists.txt only where lcm_gui is built.
# They drive the widgets offscreen (QT_QPA_PLATFORM=offscreen), so CI needs no display.
#   lcm_gui_tests: session, layout panel, estimate view, planner tab, scenario errors,
#                  validation tab, chart data (widgets against lcm::model / lcm::planner)
#   lcm_plot_tests: `lcm plot` renders PNG / SVG; bad kind / extension -> exit 2
find_package(Qt6 REQUIRED COMPONENTS Test)
foreach(t lcm_gui_tests lcm_plot_tests)
  string(REPLACE "lcm_" "" stem ${t})
  string(REPLACE "_tests" "_test.cpp" src ${stem})
  add_executable(${t} ${CMAKE_CURRENT_LIST_DIR}/${src})
  target_link_libraries(${t} PRIVATE lcm::gui Qt6::Test lcm_warnings)
  target_compile_definitions(${t} PRIVATE
    LCM_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    LCM_BINARY_DIR="${CMAKE_BINARY_DIR}")
  set_target_properties(${t} PROPERTIES AUTOMOC ON)
  add_test(NAME ${t} COMMAND ${t})
  set_tests_properties(${t} PROPERTIES ENVIRONMENT "QT_QPA_PLATFORM=offscreen" LABELS gui TIMEOUT 300)
endforeach()
add_dependencies(lcm_plot_tests lcm)
