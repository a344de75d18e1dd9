#!/usr/bin/env bash
# Style checks run by the test command: clang-format (.clang-format) on the C++
# and CUDA sources, ruff (ruff.toml) on the Python, bash -n on the shell scripts. Where a checker is missing or
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
  # pyflakes finds what ruff's F rules would: undefined and unused names.
  if command -v pyflakes3 >/dev/null || /usr/bin/python3 -c 'import pyflakes' 2>/dev/null; then
    # (pyflakes knows no `# noqa`: a line that says `noqa: ...F...` is left out here too)
    flakes=$(/usr/bin/python3 -m pyflakes "${py[@]}" 2>&1 |
      while IFS=: read -r path line rest; do
        sed -n "${line}p" "$path" 2>/dev/null | grep -qE 'noqa: [A-Z0-9,]*F' || echo "$path:$line:$rest"
      done) || true
    if [ -n "$flakes" ]; then
      echo "$flakes"
      echo "lint: pyflakes: undefined or unused names (ruff.toml's F rules)"
      status=1
    fi
    echo "lint: ruff is not here (tools/setup.sh's venv has it): Python checked with pyflakes and for line length"
  else
    echo "lint: neither ruff nor pyflakes is here: Python checked for line length only"
  fi
fi

# Shell scripts parse (a stray paste once broke the trixie leg after 40 minutes of CI).
mapfile -t sh < <(git ls-files '*.sh' .ci/run)
for script in "${sh[@]}"; do
  bash -n "$script" || { echo "lint: $script does not parse (bash -n)"; status=1; }
done
exit $status
