# Included by the top-level CMakeLists.txt when DTRAIN_CUDA is AUTO or ON: finds the CUDA
# runtime and NCCL for the NCCL local aggregator (host code only: no nvcc, no CUDA
# language, so no GPU architecture to pick), and whether LibTorch was built with CUDA.
# Sets DTRAIN_WITH_NCCL, DTRAIN_TORCH_CUDA and the imported target dtrain::nccl.
#
# Where to look: CUDAToolkit_ROOT (or nvcc on PATH, or /usr/local/cuda) for the toolkit;
# NCCL_ROOT (cache or environment) for NCCL, else beside the toolkit (NVIDIA's CUDA
# images and this CI put nccl.h in /usr/local/cuda/include), else the system paths
# (Debian/NVIDIA's libnccl-dev). A PyTorch wheel's NCCL is site-packages/nvidia/nccl.

find_package(CUDAToolkit QUIET)
set(NCCL_ROOT "$ENV{NCCL_ROOT}" CACHE PATH "where NCCL is installed (include/nccl.h, lib/libnccl.so)")
set(_dtrain_nccl_hints ${NCCL_ROOT})
if(CUDAToolkit_FOUND)
  list(APPEND _dtrain_nccl_hints ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR})
endif()
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_dtrain_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
# The wheel ships only libnccl.so.2 (no unversioned link), so ask for that name too.
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_dtrain_nccl_hints} ${CUDAToolkit_LIBRARY_DIR}
  PATH_SUFFIXES lib lib64)

set(_dtrain_cuda_missing "")
if(NOT CUDAToolkit_FOUND)
  list(APPEND _dtrain_cuda_missing "the CUDA toolkit (set CUDAToolkit_ROOT, or put nvcc on PATH)")
endif()
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
  list(APPEND _dtrain_cuda_missing
    "NCCL (nccl.h: ${NCCL_INCLUDE_DIR}, libnccl: ${NCCL_LIBRARY}, set NCCL_ROOT)")
endif()

if(_dtrain_cuda_missing)
  string(JOIN " and " _dtrain_cuda_missing_text ${_dtrain_cuda_missing})
  if(DTRAIN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DTRAIN_CUDA=ON but ${_dtrain_cuda_missing_text} not found. "
                        "Install them, point CMake at them, or configure with -DDTRAIN_CUDA=AUTO/OFF "
                        "for the CPU build.")
  endif()
  message(STATUS "dtrain: DTRAIN_CUDA=AUTO: no ${_dtrain_cuda_missing_text}; building for the CPU only")
else()
  set(DTRAIN_WITH_NCCL ON)
  message(STATUS "dtrain: CUDA ${CUDAToolkit_VERSION} (${CUDAToolkit_LIBRARY_DIR}), NCCL ${NCCL_LIBRARY}")
  if(NOT TARGET dtrain::nccl)
    add_library(dtrain::nccl UNKNOWN IMPORTED)
    set_target_properties(dtrain::nccl PROPERTIES
      IMPORTED_LOCATION "${NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES CUDA::cudart)
  endif()
  # LibTorch's config defines torch_cuda (2.x) or fills TORCH_CUDA_LIBRARIES (1.13 too)
  # only when it was built with CUDA; Debian's is not. DTRAIN_TORCH_CUDA is what the
  # device-resident trainer parts may rely on.
  if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES)
    set(DTRAIN_TORCH_CUDA ON)
  endif()
endif()
