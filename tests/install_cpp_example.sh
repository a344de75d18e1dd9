#!/bin/sh
# find_package(ovf) from an installed ovf: install the build into a scratch prefix,
# configure and build examples/cpp on its own against that prefix (as a user's
# project would), check that it links the installed libraries, and run it.
# Usage: install_cpp_example.sh CMAKE GENERATOR BUILD_DIR SOURCE_DIR
set -eu
cmake=$1 generator=$2 build=$3 source=$4
prefix="$build/install-cpp-test"
example="$build/install-cpp-example"
rm -rf "$prefix" "$example"
"$cmake" --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/lib/cmake/ovf/ovfConfig.cmake"
test -f "$prefix/include/ovf/ovf.h"
# a fresh configure that knows nothing of the build tree: only the prefix
"$cmake" -S "$source/examples/cpp" -B "$example" -G "$generator" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
"$cmake" --build "$example" >/dev/null
linked=$(ldd "$example/train" | grep 'libovf_torch.so')
case "$linked" in
  *"=> $prefix/lib/ovf/python/ovf/libovf_torch.so"*) ;;
  *) echo "train links the wrong libovf_torch: $linked"; exit 1 ;;
esac
status=0
out=$("$example/train" 2>&1) || status=$?
echo "$out" | tail -3
if [ "$status" -ne 1 ] || ! echo "$out" | grep -qxF 'ovf: the first non-finite value was produced by aten::log in stretch (batch 2)'; then
  echo "unexpected: exit status $status"
  exit 1
fi
echo "installed ovf: find_package, build and run OK"
