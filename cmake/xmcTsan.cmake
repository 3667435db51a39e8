# ThreadSanitizer twins (xmc qualify --sanitize thread; docs/qualify.md): a target of
# this project built a second time from the same sources with -fsanitize=thread,
# named <target>_tsan, its in-project libraries replaced by their twins. Libraries
# from elsewhere (GTest, rapidcheck, the C++ runtime) stay as Debian built them:
# TSan sees races in the instrumented code, which is all of xmc's.
# Executables and modules land in <libdir>/tsan/ under their plain names, so the
# TSan runner finds the TSan backends by name in its own folder.

# The twin of `lib` when it is a library this project compiles, else `lib` itself.
function(_xmc_tsan_map lib out)
  set(name "${lib}")
  if(name MATCHES "^\\$<LINK_ONLY:(.+)>$")
    set(name "${CMAKE_MATCH_1}")
  endif()
  if(TARGET ${name})
    get_target_property(imported ${name} IMPORTED)
    get_target_property(type ${name} TYPE)
    get_target_property(aliased ${name} ALIASED_TARGET)
    if(aliased)
      set(name ${aliased})
    endif()
    if(NOT imported AND (type STREQUAL "STATIC_LIBRARY" OR type STREQUAL "OBJECT_LIBRARY"))
      xmc_tsan_twin(${name})
      string(REPLACE "${name}" "${name}_tsan" lib "${lib}")
    endif()
  endif()
  set(${out} "${lib}" PARENT_SCOPE)
endfunction()

function(xmc_tsan_twin target)
  if(TARGET ${target}_tsan)
    return()
  endif()
  get_target_property(type ${target} TYPE)
  get_target_property(dir ${target} SOURCE_DIR)
  get_target_property(srcs ${target} SOURCES)
  set(twin_srcs "")
  foreach(s ${srcs})
    if(s MATCHES "^\\$<TARGET_OBJECTS:(.+)>$")
      _xmc_tsan_map(${CMAKE_MATCH_1} mapped)
      list(APPEND twin_srcs "$<TARGET_OBJECTS:${mapped}>")
    elseif(IS_ABSOLUTE "${s}")
      list(APPEND twin_srcs "${s}")
    else()
      list(APPEND twin_srcs "${dir}/${s}")
    endif()
  endforeach()
  if(type STREQUAL "EXECUTABLE")
    add_executable(${target}_tsan ${twin_srcs})
  elseif(type STREQUAL "MODULE_LIBRARY")
    add_library(${target}_tsan MODULE ${twin_srcs})
  elseif(type STREQUAL "SHARED_LIBRARY")  # a fake driver, loaded by path (XMC_CUDA_DRIVER)
    add_library(${target}_tsan SHARED ${twin_srcs})
  elseif(type STREQUAL "STATIC_LIBRARY")
    add_library(${target}_tsan STATIC ${twin_srcs})
  elseif(type STREQUAL "OBJECT_LIBRARY")
    add_library(${target}_tsan OBJECT ${twin_srcs})
  else()
    message(FATAL_ERROR "xmc_tsan_twin: ${target} is a ${type}")
  endif()
  foreach(p INCLUDE_DIRECTORIES COMPILE_DEFINITIONS COMPILE_OPTIONS INTERFACE_INCLUDE_DIRECTORIES
            INTERFACE_SYSTEM_INCLUDE_DIRECTORIES INTERFACE_COMPILE_DEFINITIONS C_VISIBILITY_PRESET
            CXX_VISIBILITY_PRESET VISIBILITY_INLINES_HIDDEN PREFIX OUTPUT_NAME UNITY_BUILD UNITY_BUILD_MODE)
    get_target_property(v ${target} ${p})
    if(v)
      set_property(TARGET ${target}_tsan PROPERTY ${p} "${v}")
    endif()
  endforeach()
  foreach(p LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    get_target_property(libs ${target} ${p})
    set(mapped_libs "")
    if(libs)
      foreach(l ${libs})
        if(l MATCHES "^::@")  # CMake's marker of a link made from another directory
          continue()
        endif()
        _xmc_tsan_map("${l}" m)
        list(APPEND mapped_libs "${m}")
      endforeach()
    endif()
    set_property(TARGET ${target}_tsan PROPERTY ${p} "${mapped_libs}")
  endforeach()
  # What the sanitizer stage builds (the xmc_tsan_stage target): every twin and its plain
  # original, which `qualify --sanitize thread --backend <plain path>` is given.
  if(NOT type STREQUAL "STATIC_LIBRARY" AND NOT type STREQUAL "OBJECT_LIBRARY")
    set_property(GLOBAL APPEND PROPERTY XMC_TSAN_STAGE_TARGETS ${target} ${target}_tsan)
  endif()
  get_target_property(out_name ${target}_tsan OUTPUT_NAME)
  if(NOT out_name)
    set_property(TARGET ${target}_tsan PROPERTY OUTPUT_NAME ${target})
  endif()
  # -O1: what TSan's authors advise, and half the compile time of -O3 on a CI machine.
  target_compile_options(${target}_tsan PRIVATE -fsanitize=thread -fno-omit-frame-pointer -O1)
  target_link_options(${target}_tsan PRIVATE -fsanitize=thread)
  set_target_properties(${target}_tsan PROPERTIES
    ARCHIVE_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tsan-archives
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_LIBRARY_OUTPUT_DIRECTORY}/tsan
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_LIBRARY_OUTPUT_DIRECTORY}/tsan)
endfunction()

# xmc_tsan_stage: what ci/sanitizers' ThreadSanitizer half runs, and nothing else of the build:
# every twin with its plain original, and the fake CUDA driver both ways (made at the end of the
# top folder, after every deferred twin).
function(xmc_tsan_stage_target)
  get_property(targets GLOBAL PROPERTY XMC_TSAN_STAGE_TARGETS)
  add_custom_target(xmc_tsan_stage)
  # The Level Zero backend's twin is left out: no CI run loads it (its fake comes through the
  # Debian loader, which is not instrumented); `--target xmc_backend_level_zero_tsan` builds it.
  list(FILTER targets EXCLUDE REGEX "^xmc_backend_level_zero")
  if(targets)
    list(REMOVE_DUPLICATES targets)
    add_dependencies(xmc_tsan_stage ${targets})
  endif()
endfunction()

