#!/usr/bin/env bash
# Style checks run by the test command: clang-format (.clang-format) on the C++
# and CUDA sources, ruff (ruff.toml) on the Python. Where a checker is missing or
# of another version than the one the tree is formatted with, it says so and
# checks what it can instead: Python lines of at most 100 columns.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0

# clang-format's output differs between major versions: the tree follows 14.
mapfile -t cxx < <(git ls-files '*.cpp' '*.h' '*.c' '*.cu' '*.cuh' '*.inc')
if version=$(clang-format --version 2>/dev/null) && [[ $version =~ version\ 14\. ]]; then
  if ! clang-format --dry-run -Werror "${cxx[@]}"; then
    echo "lint: C++ is not formatted as .clang-format says: run clang-format -i on the files above"
    status=1
  fi
else
  echo "lint: clang-format 14 is not here (${version:-none}): C++ formatting not checked on this machine"
fi

mapfile -t py < <(git ls-files '*.py' gdb/ovf-gdb.py)
if command -v ruff >/dev/null; then
  ruff check --quiet "${py[@]}" || status=1
else
  long=$(awk 'length > 100 { print FILENAME ":" FNR ": " length " columns" }' "${py[@]}")
  if [ -n "$long" ]; then
    echo "$long"
    echo "lint: Python lines over 100 columns (ruff.toml's line-length)"
    status=1
  fi
  echo "lint: ruff is not here (Debian bookworm has none): Python checked for line length only"
fi
exit $status
