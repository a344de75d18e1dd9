# ovf_find_torch([hint directories of TorchConfig.cmake]): find_package(Torch) that also
# works for a pip torch, for ovf's own build and for programs that find_package(ovf)
# (installed beside ovfConfig.cmake). Needs no Python.
#
# A CUDA build of torch (PyPI's default, even on machines without a GPU) makes torch's
# CMake config look for a CUDA toolkit and fail without one: this helps it find NVIDIA's
# (/usr/local/cuda) unless CUDA_TOOLKIT_ROOT_DIR, CUDA_HOME or CUDA_PATH say otherwise,
# builds for ovf's architectures (torch's list names some that newer nvccs refuse), and
# takes the libraries a toolkit may lack (nvrtc) from the wheel's nvidia-*-cuXX packages.
# Sets OVF_TORCH_LIB_DIRS: where torch's libraries and its wheel's CUDA libraries are.
# Raises CMAKE_CXX_STANDARD to torch's (C++20 for torch 2.14, 17 for 2.6): the imported
# target names it, but an imported target's CXX_STANDARD does not reach what links it.
macro(ovf_find_torch)
  set(_ovf_torch_hints ${ARGN})
  if(DEFINED Torch_DIR)
    list(PREPEND _ovf_torch_hints "${Torch_DIR}")
  endif()
  set(OVF_TORCH_LIB_DIRS "")
  foreach(_ovf_hint IN LISTS _ovf_torch_hints)
    # A pip torch: site-packages/torch/share/cmake/Torch; its CUDA libraries are
    # site-packages/nvidia/cuNN/lib (CUDA 13 wheels) or nvidia/<library>/lib (before).
    get_filename_component(_ovf_site "${_ovf_hint}/../../../.." ABSOLUTE)
    if(EXISTS "${_ovf_site}/torch/lib" AND NOT OVF_TORCH_LIB_DIRS)
      file(GLOB _ovf_nvidia_dirs LIST_DIRECTORIES true "${_ovf_site}/nvidia/cu[0-9]*/lib"
        "${_ovf_site}/nvidia/cuda_runtime/lib" "${_ovf_site}/nvidia/cuda_nvrtc/lib")
      set(OVF_TORCH_LIB_DIRS "${_ovf_site}/torch/lib" ${_ovf_nvidia_dirs})
    endif()
  endforeach()
  if(NOT DEFINED CUDA_TOOLKIT_ROOT_DIR AND NOT DEFINED ENV{CUDA_HOME} AND NOT DEFINED ENV{CUDA_PATH}
     AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CUDA_TOOLKIT_ROOT_DIR /usr/local/cuda)
  endif()
  if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(TORCH_CUDA_ARCH_LIST "7.5;8.0;9.0+PTX")  # the architectures of ovf's CUDA kernels
  endif()
  if(OVF_TORCH_LIB_DIRS)
    find_library(CUDA_nvrtc_LIBRARY NAMES nvrtc libnvrtc.so.13 libnvrtc.so.12
      HINTS ${OVF_TORCH_LIB_DIRS} "${CUDA_TOOLKIT_ROOT_DIR}/lib64")
  endif()
  find_package(Torch REQUIRED HINTS ${_ovf_torch_hints})
  get_target_property(_ovf_torch_std torch CXX_STANDARD)
  if(_ovf_torch_std AND _ovf_torch_std GREATER CMAKE_CXX_STANDARD)
    set(CMAKE_CXX_STANDARD ${_ovf_torch_std})
  endif()
endmacro()
