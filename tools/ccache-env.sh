# Sourced by tools/setup.sh and tools/test.sh: one compiler cache, outside the checkout,
# shared by the test build (build/) and the wheel's (build/wheel): the same sources and
# flags in another build directory are hits (the directory is not hashed).
export CCACHE_DIR=${CCACHE_DIR:-${OVF_CACHE:-/var/cache/ovf}/ccache}
export CCACHE_NOHASHDIR=true
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-4G}
# CMake (3.17 and later) takes these as a new build directory's compiler launchers: the
# test build's configure and the wheel's (scikit-build-core passes the environment on).
export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
