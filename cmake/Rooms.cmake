# The rooms between compiler and runtime (docs/architecture.md, "Rooms"):
# io/ (files both sides write and read), plan/ (the plan format) and
# config/ (the ds_config reader). Configured before LLVM's flags, like the
# runtime: they throw at their edges (JSON, protobuf, I/O errors).
find_package(Protobuf REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
set(_dsc_room_flags $<$<COMPILE_LANGUAGE:CXX>:-fexceptions> $<$<COMPILE_LANGUAGE:CXX>:-O3>)
foreach(room io plan config)
  add_subdirectory(${PROJECT_SOURCE_DIR}/${room} ${PROJECT_BINARY_DIR}/${room})
  get_property(_targets DIRECTORY ${PROJECT_SOURCE_DIR}/${room} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t ${_targets})
    target_compile_options(${t} PRIVATE ${_dsc_room_flags})
  endforeach()
endforeach()
