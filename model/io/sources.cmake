# Sources of the YAML / Megatron input edge (owned by model/io/).
set(LCM_MODEL_IO_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/config_error.cpp
  ${CMAKE_CURRENT_LIST_DIR}/enums.cpp
  ${CMAKE_CURRENT_LIST_DIR}/yaml_read.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scenario_fields.cpp
  ${CMAKE_CURRENT_LIST_DIR}/loader_core.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scenario_loader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scenario_writer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hardware_profile.cpp
  ${CMAKE_CURRENT_LIST_DIR}/megatron_cmdline.cpp
  ${CMAKE_CURRENT_LIST_DIR}/megatron_flags.cpp
  ${CMAKE_CURRENT_LIST_DIR}/megatron_flag_names.cpp
  ${CMAKE_CURRENT_LIST_DIR}/megatron_import.cpp
  ${CMAKE_CURRENT_LIST_DIR}/megatron_import_job.cpp
  ${CMAKE_CURRENT_LIST_DIR}/megatron_layout.cpp
)
