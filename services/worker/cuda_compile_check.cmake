# dtrain_cuda_compile_check: the worker's CUDA LibTorch code (the DTRAIN_TORCH_CUDA branches)
# compiled where LibTorch has no CUDA, so that CI (Debian's CPU LibTorch 1.13, the CUDA
# toolkit, no GPU) sees a compile error in it. An OBJECT library that nothing links: it
# compiles DTRAIN_WORKER_TORCH_CUDA_SOURCES with DTRAIN_TORCH_CUDA=1 against a CUDA LibTorch's
# headers (Debian trixie's libtorch-cuda-dev 2.6, unpacked by deploy/fetch-torch-cuda-headers.sh)
# and the toolkit's. Only those include directories, not Torch::torch's: the build's own
# LibTorch (1.13, /usr/include) must not mix in; a 2.6 header is found first, and
# device_copies_cuda.cc asserts the version it sees.
#
# Needs DTRAIN_WITH_NCCL (the toolkit found). Skipped where LibTorch itself has CUDA: the
# real targets compile the same code there. The target is part of `all`; the ctest
# cuda_compile_check builds it too, or fails saying the headers are missing, so a CI run
# that did not fetch them cannot pass.

set(DTRAIN_TORCH_CUDA_HEADERS "${CMAKE_BINARY_DIR}/torch-cuda-headers/usr/include" CACHE PATH
    "a CUDA LibTorch's include directory, for dtrain_cuda_compile_check (deploy/fetch-torch-cuda-headers.sh)")

# Every worker source that mentions DTRAIN_TORCH_CUDA must be in the list: a file added
# with a CUDA branch that CI does not compile would rot unseen.
file(GLOB _dtrain_worker_sources RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/*.cc
     ${CMAKE_CURRENT_SOURCE_DIR}/kv/*.cc)
foreach(_f IN LISTS _dtrain_worker_sources)
  file(STRINGS ${CMAKE_CURRENT_SOURCE_DIR}/${_f} _hits REGEX "DTRAIN_TORCH_CUDA")
  if(_hits AND NOT _f IN_LIST DTRAIN_WORKER_TORCH_CUDA_SOURCES)
    message(FATAL_ERROR "services/worker/${_f} has DTRAIN_TORCH_CUDA code but is not in "
                        "DTRAIN_WORKER_TORCH_CUDA_SOURCES (services/worker/CMakeLists.txt): CI would not compile it")
  endif()
endforeach()

# What the ctest cuda_compile_check (tests/unit/worker) does: "build", "missing: WHY", or
# nothing where there is nothing to check.
set(_dtrain_check "")
if(NOT DTRAIN_WITH_NCCL)
  set(_dtrain_check_text "off (no CUDA toolkit)")
elseif(DTRAIN_TORCH_CUDA)
  set(_dtrain_check_text "off (LibTorch has CUDA: the worker's own targets compile this code)")
elseif(NOT EXISTS "${DTRAIN_TORCH_CUDA_HEADERS}/torch/csrc/api/include/torch/torch.h")
  string(CONCAT _dtrain_check_text "MISSING: no CUDA LibTorch headers in ${DTRAIN_TORCH_CUDA_HEADERS}, run "
                "bash deploy/fetch-torch-cuda-headers.sh ${CMAKE_BINARY_DIR}")
  set(_dtrain_check "missing: ${_dtrain_check_text}")
else()
  set(_dtrain_check_text "on (${DTRAIN_TORCH_CUDA_HEADERS})")
  set(_dtrain_check "build")
  add_library(dtrain_cuda_compile_check OBJECT ${DTRAIN_WORKER_TORCH_CUDA_SOURCES})
  target_include_directories(dtrain_cuda_compile_check BEFORE PRIVATE
    ${DTRAIN_TORCH_CUDA_HEADERS}/torch/csrc/api/include
    ${DTRAIN_TORCH_CUDA_HEADERS}
    ${CUDAToolkit_INCLUDE_DIRS}
    ${NCCL_INCLUDE_DIR}
    ${PROJECT_SOURCE_DIR})
  target_compile_definitions(dtrain_cuda_compile_check PRIVATE DTRAIN_TORCH_CUDA=1 DTRAIN_WITH_NCCL=1)
  # Abseil's include directories only (its headers serve both LibTorch versions).
  target_include_directories(dtrain_cuda_compile_check PRIVATE
    $<TARGET_PROPERTY:absl::status,INTERFACE_INCLUDE_DIRECTORIES>)
endif()
set_property(GLOBAL PROPERTY DTRAIN_CUDA_COMPILE_CHECK "${_dtrain_check}")
message(STATUS "dtrain: compile check of the CUDA LibTorch code: ${_dtrain_check_text}")
