# The CUDA backend's build (REMAT_CUDA=AUTO|ON|OFF). Sets REMAT_HAVE_CUDA and
# defines remat_runtime_cuda: the device, the backend and the kernels
# (runtime/cuda). Host .cpp files are C++20 like the rest of remat; .cu files
# are C++17 (nvcc). Real code for sm_80 (A100) and sm_90 (H100/H200), plus
# sm_90 PTX for newer GPUs to JIT.
set(REMAT_HAVE_CUDA OFF)
if(NOT REMAT_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(REMAT_NVCC nvcc HINTS /usr/local/cuda/bin)
    if(REMAT_NVCC)
      set(CMAKE_CUDA_COMPILER ${REMAT_NVCC} CACHE FILEPATH "CUDA compiler")
    endif()
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(REMAT_HAVE_CUDA ON)
  elseif(REMAT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "REMAT_CUDA=ON but no CUDA compiler (nvcc) was found; "
      "set CMAKE_CUDA_COMPILER or REMAT_CUDA=OFF")
  endif()
endif()
message(STATUS "CUDA backend: ${REMAT_HAVE_CUDA} (REMAT_CUDA=${REMAT_CUDA})")
if(NOT REMAT_HAVE_CUDA)
  return()
endif()

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 90-virtual)
endif()
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
message(STATUS "CUDA ${CUDAToolkit_VERSION}: ${CMAKE_CUDA_ARCHITECTURES}")

add_library(remat_runtime_cuda STATIC
  runtime/cuda/Conv.cpp
  runtime/cuda/CudaBackend.cpp
  runtime/cuda/DataMovement.cpp
  runtime/cuda/Elementwise.cpp
  runtime/cuda/Indexing.cpp
  runtime/cuda/Linalg.cpp
  runtime/cuda/Normalization.cpp
  runtime/cuda/Reductions.cpp
  runtime/cuda/Kernels.cu
  runtime/cuda/ScatterSort.cu
)
target_include_directories(remat_runtime_cuda PUBLIC ${REMAT_SOURCE_ROOT})
# cudart is linked statically; cuBLAS (and through it cuBLASLt) is opened
# with dlopen when a CUDA executable is compiled (CudaBackend.cpp), so that
# the tools neither load half a GiB of library on every run nor need it to
# start. Its headers come with CUDA::cudart_static's include directory.
target_link_libraries(remat_runtime_cuda PUBLIC remat_ir remat_runtime
  PRIVATE CUDA::cudart_static ${CMAKE_DL_LIBS})
# Bit-reproducible float math: no contraction of a * b + c into an FMA that
# the CPU reference does not do, IEEE division and square root.
target_compile_options(remat_runtime_cuda PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--fmad=false --expt-relaxed-constexpr -prec-div=true -prec-sqrt=true
    -Xcompiler=-Wall>)
remat_target_defaults(remat_runtime_cuda)
