#!/usr/bin/env bash
# Measures the sgemm of the Debian BLAS candidates on this machine, each with its own threading,
# on a large square and on the GPT-2 LM-head shapes (BT=1024 tokens, C=256, V=50257):
#   OpenBLAS (libopenblas-dev; its kernels follow OPENBLAS_CORETYPE if set),
#   BLIS     (libblis-openmp-dev; Skylake-X kernels where the CPU has AVX-512, as the backend),
#   Eigen    (libeigen3-dev, compiled with -march=native).
# Usage: OMP_NUM_THREADS=2 bench/sgemm_candidates.sh   (GFLOP/s per library and shape, 1 and N threads)
set -euo pipefail
cd "$(dirname "$0")"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
threads="${OMP_NUM_THREADS:-2}"
shapes=("2048,2048,2048,0,0" "1024,50257,256,0,1" "1024,256,50257,0,0" "50257,256,1024,1,0")

g++ -O3 -o "$out/openblas" sgemm_candidates.cpp -I/usr/include/x86_64-linux-gnu/openblas-pthread \
    -L/usr/lib/x86_64-linux-gnu/openblas-pthread -lopenblas
g++ -O3 -fopenmp -o "$out/blis" sgemm_candidates.cpp -I/usr/include/x86_64-linux-gnu/blis-openmp \
    -L/usr/lib/x86_64-linux-gnu/blis-openmp -lblis
g++ -O3 -march=native -fopenmp -DUSE_EIGEN -I/usr/include/eigen3 -o "$out/eigen" sgemm_candidates.cpp

blis_arch=""
if grep -q avx512bw /proc/cpuinfo && [ -z "${BLIS_ARCH_TYPE:-}" ]; then blis_arch=0; fi  # skx
for t in 1 "$threads"; do
  echo "sgemm, $t thread(s) (m,n,k,transA,transB):"
  echo "OpenBLAS (OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-auto})"
  OPENBLAS_NUM_THREADS="$t" "$out/openblas" "${shapes[@]}"
  echo "BLIS (BLIS_ARCH_TYPE=${BLIS_ARCH_TYPE:-${blis_arch:-auto}})"
  BLIS_ARCH_TYPE="${BLIS_ARCH_TYPE:-$blis_arch}" BLIS_NUM_THREADS="$t" "$out/blis" "${shapes[@]}"
  echo "Eigen (-march=native)"
  OMP_NUM_THREADS="$t" "$out/eigen" "${shapes[@]}"
done
