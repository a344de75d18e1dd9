# OVF_WITH_CUDA: build the CUDA statistics backend (runtime/cuda: the fused
# kernels, their GPU test, the bandwidth benchmark). Included from the top
# directory: a language must be enabled where all its targets can see it.
#   AUTO (default)  on when CMake finds a CUDA compiler that builds a test
#                   program with this host compiler (check_language does that;
#                   an nvcc too old for the host's g++ counts as none), off with
#                   a message otherwise, so a default build never fails on CUDA;
#   ON              the same, but configuring fails without a working nvcc;
#   OFF             never.
# The host half of the backend (runtime/cuda's plain C++ and its tests) is built
# either way. nvcc is looked for on PATH, in CUDACXX and, as NVIDIA installs it,
# at /usr/local/cuda/bin/nvcc.
set(OVF_WITH_CUDA AUTO CACHE STRING "Build the CUDA statistics backend: AUTO, ON or OFF")
set_property(CACHE OVF_WITH_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${OVF_WITH_CUDA}" _ovf_cuda_request)
set(OVF_CUDA OFF)
if(_ovf_cuda_request STREQUAL "AUTO" OR OVF_WITH_CUDA)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    find_program(_ovf_nvcc_on_path nvcc)
    if(NOT _ovf_nvcc_on_path)
      set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)  # for check_language's trial and enable_language
    endif()
  endif()
  # Machine code for Turing, Ampere and Hopper (CUDA 13 dropped everything
  # before Turing, sm_75), plus Hopper's PTX so newer GPUs compile it at load
  # time. Set CMAKE_CUDA_ARCHITECTURES to override (e.g. "native").
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "75-real;80-real;90")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  set(_ovf_cuda_missing "no working CUDA compiler")
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    # nvcc may build with an older host g++ than the project's (Debian trixie: nvcc
    # 12.4 uses g++-13, the project g++-14). Executables are linked by the C++
    # compiler, but CMake adds nvcc's implicit link directories, which would put
    # g++-13's libstdc++ first (libgtest.a then misses __cxa_call_terminate): keep
    # only the directories the C++ compiler uses itself, or none of the host's.
    set(_ovf_cuda_link_dirs "")
    foreach(dir IN LISTS CMAKE_CUDA_IMPLICIT_LINK_DIRECTORIES)
      if(NOT dir MATCHES "/gcc/" OR dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
        list(APPEND _ovf_cuda_link_dirs "${dir}")
      endif()
    endforeach()
    set(CMAKE_CUDA_IMPLICIT_LINK_DIRECTORIES "${_ovf_cuda_link_dirs}")
    find_package(CUDAToolkit)  # CUDA::cudart
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    # CUB ships with the toolkit since CUDA 11, but distributions package it
    # apart (Debian: libcub-dev); the kernels need its block reduction.
    if(CMAKE_VERSION VERSION_LESS 3.19)  # no CheckSourceCompiles: assume the toolkit's own
      set(OVF_CUDA_HAVE_CUB ON)
    else()
      include(CheckSourceCompiles)
      check_source_compiles(CUDA "#include <cub/block/block_reduce.cuh>\nint main() { return 0; }"
        OVF_CUDA_HAVE_CUB)
    endif()
    # The kernels link the CUDA runtime torch loads (libcudart.so.<major>): an nvcc of
    # another major version would bring a second runtime into the process. A different
    # minor version is fine (CUDA's minor-version compatibility; the driver decides).
    string(REGEX MATCH "^[0-9]+" _ovf_nvcc_major "${CMAKE_CUDA_COMPILER_VERSION}")
    string(REGEX MATCH "^[0-9]+" _ovf_torch_cuda_major "${OVF_TORCH_CUDA}")
    if(NOT CUDAToolkit_FOUND)
      set(_ovf_cuda_missing "nvcc ${CMAKE_CUDA_COMPILER_VERSION} without its toolkit's libraries")
    elseif(OVF_TORCH_CUDA AND NOT _ovf_nvcc_major STREQUAL _ovf_torch_cuda_major)
      set(_ovf_cuda_missing "nvcc ${CMAKE_CUDA_COMPILER_VERSION} for torch's CUDA ${OVF_TORCH_CUDA} "
        "(another major version: set CUDACXX to an nvcc ${_ovf_torch_cuda_major}.x)")
    elseif(OVF_CUDA_HAVE_CUB)
      set(OVF_CUDA ON)
    else()
      set(_ovf_cuda_missing "nvcc ${CMAKE_CUDA_COMPILER_VERSION} without CUB")
    endif()
  endif()
  if(OVF_CUDA)
    if(CMAKE_CUDA_ARCHITECTURES)
      set(_ovf_archs "architectures ${CMAKE_CUDA_ARCHITECTURES}")
    else()  # a CUDA torch's config turns them off and passes TORCH_CUDA_ARCH_LIST's flags
      set(_ovf_archs "architectures ${TORCH_CUDA_ARCH_LIST}, as torch's CMake passes them")
    endif()
    message(STATUS "ovf: CUDA statistics backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, ${_ovf_archs})")
  elseif(_ovf_cuda_request STREQUAL "AUTO")
    message(STATUS "ovf: ${_ovf_cuda_missing}: the CUDA statistics backend is not built "
      "(OVF_WITH_CUDA=AUTO)")
  else()
    message(FATAL_ERROR "OVF_WITH_CUDA=${OVF_WITH_CUDA}, but ${_ovf_cuda_missing} was found "
      "(set CUDACXX or CMAKE_CUDA_COMPILER to an nvcc that supports this host compiler)")
  endif()
else()
  message(STATUS "ovf: the CUDA statistics backend is off (OVF_WITH_CUDA=${OVF_WITH_CUDA})")
endif()
