# chimera_find_nccl(PREFIXES): sets NCCL_INCLUDE_DIR and NCCL_LIBRARY (cache) from nccl.h and the
# library, searched under each prefix's include/ and lib*/ and then the system. The library may be
# the runtime file libnccl.so.2 alone: PyTorch's nvidia-nccl wheels and the NCCL runtime packages
# ship no libnccl.so development link, and find_library(nccl) would silently miss them.
function(chimera_find_nccl prefixes)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${prefixes} PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${prefixes}
               PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
endfunction()
