# Warnings every Chimera target builds with; the tree is kept clean of them.
add_library(chimera_warnings INTERFACE)
target_compile_options(chimera_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wold-style-cast -Wcast-align -Woverloaded-virtual
    -Wimplicit-fallthrough -Wformat=2>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${CHIMERA_WERROR}>>:-Werror>)
