# Sourced by tools/setup.sh and tools/test.sh: one compiler cache, outside the checkout,
# shared by the test build (build/) and the wheel's (build/wheel): the same sources and
# flags in another build directory are hits (the directory is not hashed).
export CCACHE_DIR=${CCACHE_DIR:-${OVF_CACHE:-/var/cache/ovf}/ccache}
export CCACHE_NOHASHDIR=true
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-4G}
# CMake (3.17 and later) takes these as a new build directory's compiler launchers: the
# test build's configure and the wheel's (scikit-build-core passes the environment on).
# Only where ccache exists: the trixie root has none, and a launcher that is not there fails
# every configure that inherits it (the install test's own CMake project did, in CI).
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
else
  unset CMAKE_CXX_COMPILER_LAUNCHER CMAKE_CUDA_COMPILER_LAUNCHER
fi
