# lcm-gui tests (QtTest), included from tests/CMakeLists.txt only where lcm_gui is built.
# They drive the widgets offscreen (QT_QPA_PLATFORM=offscreen), so CI needs no display.
#   lcm_gui_tests: session, layout panel, estimate view, planner tab, scenario errors,
#                  validation tab, chart data (widgets against lcm::model / lcm::planner)
#   lcm_plot_tests: `lcm plot` renders PNG / SVG; bad kind / extension -> exit 2
#   lcm_gui_timeline_tests: the Timeline tab's rows, colours, zoom / pan, hover, flows, title
#   lcm_gui_layout_tests: no text cut off in any tab at 1280x800 / 1920x1080, 1-16 stages
find_package(Qt6 REQUIRED COMPONENTS Test)
foreach(t lcm_gui_tests lcm_plot_tests lcm_gui_timeline_tests lcm_gui_layout_tests)
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
add_dependencies(lcm_gui_tests lcm-gui)  # `lcm-gui --help` without a display
