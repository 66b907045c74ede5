# Sources of the YAML / Megatron input edge (owned by model/io/).
set(LCM_MODEL_IO_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/config_error.cpp
  ${CMAKE_CURRENT_LIST_DIR}/enums.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scenario_loader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/megatron_import.cpp
)
