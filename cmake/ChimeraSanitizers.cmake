# CHIMERA_SANITIZE (e.g. "address,undefined"): every target is compiled and linked with those
# sanitizers (CI's second pass; the `asan` preset).
if(CHIMERA_SANITIZE)
  add_compile_options(-fsanitize=${CHIMERA_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${CHIMERA_SANITIZE})
endif()

# chimera_keep_libraries_loaded(TARGET): under AddressSanitizer, the executable TARGET keeps every
# shared library it opens loaded until exit, so that LeakSanitizer's reports of Open MPI's plugins
# name them and match the suppressions with the fast unwinder (tests/sanitizers/
# keep_libraries_loaded.cpp says why). Nothing otherwise.
if(CHIMERA_SANITIZE MATCHES "address")
  add_library(chimera_keep_libraries_loaded OBJECT
              ${PROJECT_SOURCE_DIR}/tests/sanitizers/keep_libraries_loaded.cpp)
endif()
function(chimera_keep_libraries_loaded target)
  if(TARGET chimera_keep_libraries_loaded)
    target_link_libraries(${target} PRIVATE chimera_keep_libraries_loaded)
    # Libraries opened later (the plugins) resolve dlclose through the executable's dynamic
    # symbols, which hold only what the link saw used unless told otherwise.
    target_link_options(${target} PRIVATE LINKER:--export-dynamic-symbol=dlclose)
  endif()
endfunction()
