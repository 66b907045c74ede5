# Tests of the installed and the GUI binaries (scripts, not GoogleTest).
#   lcm_install: `cmake --install` to a temporary prefix; the installed lcm finds its data
#                without the source tree (tests/cli/install_test.sh).
#   lcm_gui_help_without_display: `lcm-gui --help` with no display at all.
add_test(NAME lcm_install COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/install_test.sh ${CMAKE_BINARY_DIR})
set_tests_properties(lcm_install PROPERTIES TIMEOUT 120)
if(TARGET lcm-gui)
  add_test(NAME lcm_gui_help_without_display
           COMMAND env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM $<TARGET_FILE:lcm-gui> --help)
  set_tests_properties(lcm_gui_help_without_display PROPERTIES PASS_REGULAR_EXPRESSION "Usage: .*lcm-gui" TIMEOUT 30)
endif()

# --- wt-bands (issue 12): figures quoted in docs/ come from the current outputs -------------
add_test(NAME docs_figures COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/docs_figures_check.sh ${PROJECT_SOURCE_DIR}
                                        ${CMAKE_BINARY_DIR})
set_tests_properties(docs_figures PROPERTIES TIMEOUT 300)
