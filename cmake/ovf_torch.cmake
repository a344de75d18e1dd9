# Torch and pybind11 for the interpreter ovf is built for (Python_EXECUTABLE: a venv's
# python, the one `pip install .` runs, or Debian's /usr/bin/python3 with python3-torch):
# a pip torch keeps its CMake files inside its package (torch.utils.cmake_prefix_path).
# CMAKE_PREFIX_PATH, Torch_DIR or pybind11_DIR given by the caller win. Sets
# OVF_TORCH_CUDA to torch's CUDA version ("" for a CPU build), and what ovf_find_torch sets.
function(ovf_ask_python out code)
  execute_process(COMMAND "${Python_EXECUTABLE}" -c "${code}" OUTPUT_VARIABLE answer
    RESULT_VARIABLE failed OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(failed)
    set(answer "")
  endif()
  set(${out} "${answer}" PARENT_SCOPE)
endfunction()

ovf_ask_python(_ovf_pybind11_dir "import pybind11; print(pybind11.get_cmake_dir())")
if(IS_DIRECTORY "${_ovf_pybind11_dir}")
  list(APPEND CMAKE_PREFIX_PATH "${_ovf_pybind11_dir}")
endif()
ovf_ask_python(_ovf_torch_facts
  "import torch, torch.utils; print(torch.utils.cmake_prefix_path); print(torch.version.cuda or 'cpu')")
if(NOT _ovf_torch_facts)
  message(FATAL_ERROR "${Python_EXECUTABLE} cannot import torch: build ovf with the interpreter "
    "that has torch (-DPython_EXECUTABLE=<venv>/bin/python; with pip: "
    "pip install --no-build-isolation ., so that the build sees the installed torch)")
endif()
string(REPLACE "\n" ";" _ovf_torch_facts "${_ovf_torch_facts}")
list(GET _ovf_torch_facts 0 _ovf_torch_prefix)
list(GET _ovf_torch_facts 1 OVF_TORCH_CUDA)
if(OVF_TORCH_CUDA STREQUAL "cpu")
  set(OVF_TORCH_CUDA "")
endif()

find_package(pybind11 CONFIG REQUIRED)
include(${CMAKE_CURRENT_LIST_DIR}/ovf_find_torch.cmake)
ovf_find_torch("${_ovf_torch_prefix}/Torch")
# TORCH_LIBRARIES lacks libtorch_python, which tensor <-> Python conversion needs.
find_library(TORCH_PYTHON_LIBRARY torch_python HINTS "${TORCH_INSTALL_PREFIX}/lib" REQUIRED)
if(OVF_TORCH_CUDA)
  set(_ovf_torch_kind "CUDA ${OVF_TORCH_CUDA} build")
else()
  set(_ovf_torch_kind "CPU build")
endif()
message(STATUS "ovf: torch ${Torch_VERSION} (${_ovf_torch_kind}) from ${Torch_DIR}; "
  "Python ${Python_VERSION} (${Python_EXECUTABLE}); C++${CMAKE_CXX_STANDARD}")
