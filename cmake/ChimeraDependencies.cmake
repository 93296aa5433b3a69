# Every third-party dependency, found once here. scripts/setup installs them from Debian.
find_package(MPI REQUIRED COMPONENTS C CXX)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(toml11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(PkgConfig REQUIRED)

# Parallel HDF5 (the MPI-IO driver writes checkpoints from many ranks at once).
set(HDF5_PREFER_PARALLEL ON)
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(WARNING "HDF5 is not built with MPI: multi-rank checkpoints need libhdf5-openmpi-dev")
endif()
add_library(chimera_hdf5 INTERFACE)
target_include_directories(chimera_hdf5 SYSTEM INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
target_link_libraries(chimera_hdf5 INTERFACE ${HDF5_C_LIBRARIES} ${HDF5_LIBRARIES} MPI::MPI_C)
target_compile_definitions(chimera_hdf5 INTERFACE ${HDF5_DEFINITIONS} ${HDF5_C_DEFINITIONS})

# BLAS for the CPU backend: BLIS built with OpenMP (Debian libblis-openmp-dev). Measured against
# OpenBLAS and Eigen on the target machine (docs/model.md, bench/sgemm_candidates.sh): BLIS with its
# AVX-512 kernels is the fastest sgemm, and its OpenMP build shares our OpenMP thread pool.
find_path(BLIS_INCLUDE_DIR blis.h PATH_SUFFIXES blis-openmp x86_64-linux-gnu/blis-openmp blis REQUIRED)
find_library(BLIS_LIBRARY NAMES blis PATH_SUFFIXES blis-openmp x86_64-linux-gnu/blis-openmp REQUIRED)
add_library(chimera_blis INTERFACE)
target_include_directories(chimera_blis SYSTEM INTERFACE ${BLIS_INCLUDE_DIR})
target_link_libraries(chimera_blis INTERFACE ${BLIS_LIBRARY} OpenMP::OpenMP_CXX)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# zstd-compressed corpora (`chimera prep` reads .zst): Debian libzstd-dev.
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)

# oneDNN (Debian libdnnl-dev) for the CPU backend's bf16 GEMMs: its matmul picks AMX or
# AVX-512-BF16 kernels from the CPU. Built with OpenMP, it shares our thread pool. Found by hand:
# Debian's dnnl-config.cmake also requires the OpenCL headers of its GPU runtime, which we never use.
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp REQUIRED)
find_library(DNNL_LIBRARY NAMES dnnl REQUIRED)
add_library(chimera_dnnl INTERFACE)
target_include_directories(chimera_dnnl SYSTEM INTERFACE ${DNNL_INCLUDE_DIR})
target_link_libraries(chimera_dnnl INTERFACE ${DNNL_LIBRARY})

if(CHIMERA_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(CHIMERA_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

# CUDA is detected, never required unless CHIMERA_CUDA=ON; the CPU-only build (CHIMERA_CUDA=OFF)
# never looks for it. docs/cuda.md explains the choices below.
set(CHIMERA_HAVE_CUDA OFF)
set(CHIMERA_HAVE_NCCL OFF)
set(CHIMERA_CUDA_ARCHITECTURES "" CACHE STRING
    "GPU architectures to build for (CMAKE_CUDA_ARCHITECTURES syntax, e.g. 90 or 80;90); empty: 90")
set(CHIMERA_NCCL "AUTO" CACHE STRING "Sum gradients with NCCL: AUTO (if found), ON, OFF")
set_property(CACHE CHIMERA_NCCL PROPERTY STRINGS AUTO ON OFF)
if(NOT CHIMERA_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Architectures: CHIMERA_CUDA_ARCHITECTURES, else CMAKE_CUDA_ARCHITECTURES if the user set it,
    # else one architecture, sm_90 (H100/H200) with its PTX (later GPUs JIT-compile it): every
    # architecture more costs the whole .cu compile time again, and CI compiles on 2 cores.
    # P100 (sm_60) needs nvcc <= 12.x: CUDA 13 builds Turing (sm_75) and newer only.
    execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --version OUTPUT_VARIABLE _nvcc_version_text)
    string(REGEX MATCH "release ([0-9]+)\\.([0-9]+)" _ "${_nvcc_version_text}")
    set(CHIMERA_NVCC_VERSION "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
    if(CHIMERA_NVCC_VERSION VERSION_LESS 12.0)
      message(FATAL_ERROR "nvcc ${CHIMERA_NVCC_VERSION} at ${CMAKE_CUDA_COMPILER}: the CUDA backend needs CUDA 12.0 or newer (or configure with -DCHIMERA_CUDA=OFF)")
    endif()
    if(CHIMERA_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "${CHIMERA_CUDA_ARCHITECTURES}" CACHE STRING "CUDA architectures" FORCE)
    elseif(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "90" CACHE STRING "CUDA architectures")
    endif()
    if(CHIMERA_NVCC_VERSION VERSION_GREATER_EQUAL 13.0 AND CMAKE_CUDA_ARCHITECTURES MATCHES "(^|;)(5[0-9]|6[0-9]|70|72)")
      message(FATAL_ERROR "CMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES}: nvcc ${CHIMERA_NVCC_VERSION} builds sm_75 and newer only; Pascal (sm_60, P100) and Volta (sm_70) need CUDA 12.x (docs/cuda.md)")
    endif()
    # Kernels are C++17: CMake 3.25 knows no C++20 flag for nvcc.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)  # the same libcudart as cuBLAS and NCCL use
    enable_language(CUDA)
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(CHIMERA_HAVE_CUDA ON)
    endif()
  endif()
  if(CHIMERA_CUDA STREQUAL "ON" AND NOT CHIMERA_HAVE_CUDA)
    message(FATAL_ERROR "CHIMERA_CUDA=ON but no CUDA compiler/toolkit was found")
  endif()
endif()
if(CHIMERA_HAVE_CUDA AND NOT CHIMERA_NCCL STREQUAL "OFF")
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS $ENV{NCCL_HOME}/include ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY nccl HINTS $ENV{NCCL_HOME}/lib ${CUDAToolkit_LIBRARY_DIR})
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(CHIMERA_HAVE_NCCL ON)
    add_library(chimera_nccl INTERFACE)
    target_include_directories(chimera_nccl SYSTEM INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(chimera_nccl INTERFACE ${NCCL_LIBRARY})
  elseif(CHIMERA_NCCL STREQUAL "ON")
    message(FATAL_ERROR "CHIMERA_NCCL=ON but nccl.h / libnccl were not found (set NCCL_HOME)")
  endif()
endif()
if(CHIMERA_HAVE_CUDA)
  message(STATUS "Chimera: CUDA backend ON (nvcc ${CHIMERA_NVCC_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}), NCCL ${CHIMERA_HAVE_NCCL}")
else()
  message(STATUS "Chimera: CUDA backend OFF")
endif()
