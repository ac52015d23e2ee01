# Shared compile settings for every zero target.
add_library(zero_warnings INTERFACE)
target_compile_options(zero_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Woverloaded-virtual
  -Wnull-dereference -Wimplicit-fallthrough
  $<$<BOOL:${ZERO_WERROR}>:-Werror>)
# Warnings one build turns off after the list above (which would re-enable them if they came
# first, as CMAKE_CXX_FLAGS do): the `fuzz` preset's clang warns where GCC does not.
set(ZERO_WARNING_OVERRIDES "" CACHE STRING "Compiler options appended after the warning flags")
target_compile_options(zero_warnings INTERFACE ${ZERO_WARNING_OVERRIDES})
if(ZERO_NATIVE)
  target_compile_options(zero_warnings INTERFACE -march=native)
endif()

# zero_add_folder_library(<name> <folder> [DEPS ...]): all .cpp files of one source folder
# become one static target, so adding a file never needs a CMake edit.
function(zero_add_folder_library name folder)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${folder}/*.cpp)
  if(NOT srcs)
    # A folder without sources yet still gets a target, so dependents link unchanged.
    set(srcs ${PROJECT_SOURCE_DIR}/cmake/empty_folder.cpp)
  endif()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/zero>)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE zero_warnings)
  zero_unity_build(${name})
endfunction()

# zero_unity_build(<target>): with ZERO_UNITY_BUILD, the target's sources compile 16 to a
# translation unit, so nlohmann/json and the standard headers are parsed once a batch instead of
# once a file (the library is most of CI's build). Sources with their own compile options stay
# alone (CMake's rule). Anonymous-namespace names then share a batch: a helper two sources need
# lives in one header.
function(zero_unity_build target)
  if(ZERO_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 16)
  endif()
endfunction()
