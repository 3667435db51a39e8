# xmc_add_backend(<name> SOURCES ...): a backend plugin, a shared library
# libxmc_backend_<name>.so that exports only xmc_backend_entry.
function(xmc_add_backend name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_library(xmc_backend_${name} MODULE ${ARG_SOURCES})
  target_link_libraries(xmc_backend_${name} PRIVATE xmc::headers ${ARG_LIBS})
  set_target_properties(xmc_backend_${name} PROPERTIES
    PREFIX "lib" C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
endfunction()
