# xmc_test_code(<target> [EXCEPT <source>...] [PCH <header>...] [PCH_FROM <target>]): <target> is
# test code (test bodies, the harness, the runner, the fakes' own tests), compiled for a fast build
# rather than a fast run:
#  - -O1 in the optimised builds (Release, RelWithDebInfo). At -O3 each conformance test file took
#    90-170 s of a loaded 2-core CI machine, most of it optimising GoogleTest and rapidcheck
#    templates no benchmark times. The backends, the fakes and the benchmarks keep the build's
#    optimisation: what a figure or a race depends on is theirs. EXCEPT names sources of <target>
#    that time something (the runner's bench) and keep it too.
#  - PCH: a precompiled header of the listed headers (GoogleTest, rapidcheck, the harness), or
#    PCH_FROM: the one of another test target built with the same options.
# Debug builds (coverage, ASan) are -O0 already and only get the precompiled header.
function(xmc_test_code target)
  cmake_parse_arguments(ARG "" "PCH_FROM" "EXCEPT;PCH" ${ARGN})
  if(CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo)$")
    # A target option, not a source one: the precompiled header is compiled with the target's
    # options, and GCC ignores a PCH made at another optimisation level.
    target_compile_options(${target} PRIVATE -O1)
    get_target_property(dir ${target} SOURCE_DIR)
    foreach(s ${ARG_EXCEPT})
      get_filename_component(abs "${s}" ABSOLUTE BASE_DIR "${dir}")
      set_property(SOURCE "${abs}" TARGET_DIRECTORY ${target} APPEND PROPERTY COMPILE_OPTIONS
        $<$<CONFIG:Release>:-O3> $<$<CONFIG:RelWithDebInfo>:-O2>)
      set_property(SOURCE "${abs}" TARGET_DIRECTORY ${target} PROPERTY SKIP_PRECOMPILE_HEADERS ON)
    endforeach()
  endif()
  if(ARG_PCH)
    target_precompile_headers(${target} PRIVATE ${ARG_PCH})
  elseif(ARG_PCH_FROM)
    target_precompile_headers(${target} REUSE_FROM ${ARG_PCH_FROM})
  endif()
endfunction()
