# xmc_add_backend(<name> SOURCES ... [LIBS ...] [SANITIZE thread]): a backend plugin, a
# shared library libxmc_backend_<name>.so that exports only xmc_backend_entry.
# SANITIZE thread also builds tsan/libxmc_backend_<name>.so beside it, from the same
# sources with -fsanitize=thread, for `xmc qualify --sanitize thread` (docs/qualify.md).
# In xmc's own tree the second library links the TSan builds of xmc's libraries
# (cmake/xmcTsan.cmake) and is built only where XMC_TSAN_TWINS is on.
function(xmc_add_backend name)
  cmake_parse_arguments(ARG "" "SANITIZE" "SOURCES;LIBS" ${ARGN})
  add_library(xmc_backend_${name} MODULE ${ARG_SOURCES})
  target_link_libraries(xmc_backend_${name} PRIVATE xmc::headers ${ARG_LIBS})
  set_target_properties(xmc_backend_${name} PROPERTIES
    PREFIX "lib" C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(ARG_SANITIZE AND NOT ARG_SANITIZE STREQUAL "thread")
    message(FATAL_ERROR "xmc_add_backend(${name}): SANITIZE ${ARG_SANITIZE}: only 'thread' is known")
  endif()
  if(ARG_SANITIZE STREQUAL "thread")
    if(COMMAND xmc_tsan_twin)  # xmc's own tree: its libraries have TSan builds too
      if(XMC_TSAN_TWINS)
        # At the end of the folder: after the caller's own target_* calls on the backend.
        cmake_language(EVAL CODE "cmake_language(DEFER CALL xmc_tsan_twin xmc_backend_${name})")
      endif()
    else()
      add_library(xmc_backend_${name}_tsan MODULE ${ARG_SOURCES})
      target_link_libraries(xmc_backend_${name}_tsan PRIVATE xmc::headers ${ARG_LIBS})
      target_compile_options(xmc_backend_${name}_tsan PRIVATE -fsanitize=thread -fno-omit-frame-pointer)
      target_link_options(xmc_backend_${name}_tsan PRIVATE -fsanitize=thread)
      get_target_property(out xmc_backend_${name} LIBRARY_OUTPUT_DIRECTORY)
      if(NOT out AND CMAKE_LIBRARY_OUTPUT_DIRECTORY)
        set(out ${CMAKE_LIBRARY_OUTPUT_DIRECTORY})
      elseif(NOT out)
        set(out ${CMAKE_CURRENT_BINARY_DIR})
      endif()
      set_target_properties(xmc_backend_${name}_tsan PROPERTIES
        OUTPUT_NAME xmc_backend_${name} PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${out}/tsan
        C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
    endif()
  endif()
endfunction()
