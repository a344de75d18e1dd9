#!/usr/bin/env bash
# The second test leg: ovf on the stack most users run (Debian trixie: torch 2.6, Python 3.13,
# gdb 16, lldb 19, g++ 14), without touching the host's Debian.
#
#   bash tools/test-modern.sh              # as root: build the root once, then build + test in it
#   bash tools/test-modern.sh --root-only  # only make sure the cached root exists
#
# 1. Once, a trixie root file system is made with mmdebstrap from the same Debian mirror the
#    host's apt uses, and cached outside the checkout: $OVF_TRIXIE_ROOT, by default
#    /var/cache/ovf/trixie-root-<hash of the package list>. It is built in a temporary
#    directory beside that path and renamed into place only when complete. Inside it,
#    /opt/libtorch-cuda holds the CUDA LibTorch's files, unpacked, not installed (its
#    packages cannot be configured here: their cuDNN installer downloads from the vendor).
# 2. Each run copies the checkout's files (tracked + untracked, not ignored) into /ovf in the
#    root (its build/ is kept between runs), mounts /proc, /sys and /dev there, configures and
#    builds with CMake + Ninja in a clean environment, runs tools/test.sh there and exits
#    with its status. The mounts (and any process left in the root) go on every exit path.
set -euo pipefail
{ # (bash reads all of it before running: editing this file mid-run cannot break the run)

me="test-modern.sh"
die() { echo "$me: $*" >&2; exit 1; }

root_only=0
case "${1:-}" in
  "") ;;
  --root-only) root_only=1 ;;
  *) die "unknown argument '$1' (usage: bash tools/test-modern.sh [--root-only])" ;;
esac

[ "$(id -u)" = 0 ] || die "must run as root (it builds a root file system and mounts /proc, /sys, /dev into it)"

src="$(cd "$(dirname "$0")/.." && pwd)"
suite=trixie
components=main,contrib,non-free
packages=(
  python3-torch libtorch-dev python3-numpy python3-setuptools   # torch 2.6 (CPU); inductor imports setuptools
  python3-torchvision python3-matplotlib
  python3.13-dbg python3-dbg                                    # py-bt / py-locals for python3.13
  gdb lldb-19 python3-lldb-19                                   # the two front ends
  pybind11-dev python3-pybind11
  libgtest-dev python3-pytest python3-pyelftools
  libopenblas0-pthread                                          # torch's matrix products: ~15x the reference BLAS
  build-essential cmake ninja-build git
  nvidia-cuda-toolkit                                           # nvcc 12.4 + CUB (contrib/non-free)
)
# (ruff is not packaged in trixie.)
# Downloaded and unpacked into $cuda_prefix, not installed (see above).
cuda_debs=(libtorch-cuda-dev libtorch-cuda-2.6)
cuda_prefix=/opt/libtorch-cuda
# CMake's Torch config of that prefix (inside the root): pass
# -DTorch_DIR=$cuda_prefix/usr/lib/x86_64-linux-gnu/cmake/Torch to build against the CUDA LibTorch.
cuda_torch_config=$cuda_prefix/usr/lib/x86_64-linux-gnu/cmake/Torch/TorchConfig.cmake

recipe="$suite $components | ${packages[*]} | ${cuda_debs[*]} -> $cuda_prefix"
hash=$(printf '%s\n' "$recipe" | sha256sum | cut -c1-12)
root="${OVF_TRIXIE_ROOT:-/var/cache/ovf/trixie-root-$hash}"
root="${root%/}"
case "$root" in /*) ;; *) die "OVF_TRIXIE_ROOT must be an absolute path (got '$root')" ;; esac
[ "$root" != / ] || die "OVF_TRIXIE_ROOT must not be /"
cache_dir="$(dirname "$root")"
mkdir -p "$cache_dir"

# One run at a time per root: the mounts and /ovf inside are shared.
exec 9>"$root.lock"
flock -n 9 || { echo "$me: waiting for another run that holds $root.lock"; flock 9; }

# Temporary files of earlier runs in the root (a killed run's core files: gigabytes).
rm -rf --one-file-system "$root"/tmp/pytest-of-* "$root"/tmp/tmp*

# --- clean-up, on every exit path ----------------------------------------------------------
child=""
mounted=0
mounts_under() {  # mount points at or below $1, deepest first
  findmnt -rn -o TARGET | awk -v r="$1" '$0 == r || index($0, r "/") == 1' | sort -r
}
kill_in_root() {  # every process whose root directory is $1
  local r="$1" sig p n
  for sig in TERM KILL; do
    n=0
    for p in /proc/[0-9]*; do
      [ "$(readlink "$p/root" 2>/dev/null)" = "$r" ] || continue
      kill "-$sig" "${p#/proc/}" 2>/dev/null && n=$((n + 1))
    done
    [ "$n" = 0 ] && return 0
    [ "$sig" = TERM ] && sleep 2
  done
}
unmount_all() {  # everything mounted at or below $1
  local r="$1" m
  for m in $(mounts_under "$r"); do
    umount -R "$m" 2>/dev/null || umount -R -l "$m" 2>/dev/null || true
  done
  if [ -n "$(mounts_under "$r")" ]; then
    echo "$me: warning: still mounted under $r:" >&2
    mounts_under "$r" >&2
  fi
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  if [ -n "$child" ]; then
    kill -TERM -- "-$child" 2>/dev/null || kill -TERM "$child" 2>/dev/null || true
  fi
  if [ "$mounted" = 1 ]; then
    kill_in_root "$root"
    unmount_all "$root"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "$me: interrupted" >&2; exit 130' INT
trap 'echo "$me: terminated" >&2; exit 143' TERM
trap 'echo "$me: hang-up" >&2; exit 129' HUP

# Runs a command in its own session, in the background, so that a signal to this script runs
# the trap at once (bash defers traps while a foreground child runs) and the trap can end it.
# A background job of a script starts with SIGINT ignored, and so would every program of the
# suite (a Python started so never raises KeyboardInterrupt): env gives it back its default.
run() {
  setsid env --default-signal=INT "$@" </dev/null &
  child=$!
  local rc=0
  wait "$child" || rc=$?
  child=""
  return "$rc"
}

# --- the mirror ------------------------------------------------------------------------------
host_mirror() {  # the first Debian (non-security) URI in the host's apt sources
  local f
  {
    [ -f /etc/apt/sources.list ] && awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/ && $i !~ /=/) { print $i; break } }' /etc/apt/sources.list
    for f in /etc/apt/sources.list.d/*.list; do
      [ -f "$f" ] && awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/ && $i !~ /=/) { print $i; break } }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] && awk 'tolower($1) == "uris:" { for (i = 2; i <= NF; i++) print $i }' "$f"
    done
  } 2>/dev/null | grep -E '^(https?|file)://' | grep -Ev 'security' | grep -E '/debian/?$' | head -n1
}

# --- the root --------------------------------------------------------------------------------
build_root() {
  local mirror tmp t0 check
  mirror="${OVF_DEBIAN_MIRROR:-$(host_mirror)}"
  [ -n "$mirror" ] || die "cannot find a Debian mirror in /etc/apt/sources.list or /etc/apt/sources.list.d/ (set OVF_DEBIAN_MIRROR)"
  mirror="${mirror%/}"
  check="$(mktemp)"
  if ! /usr/lib/apt/apt-helper download-file "$mirror/dists/$suite/InRelease" "$check" >"$check.log" 2>&1; then
    die "cannot read the Debian mirror $mirror ($mirror/dists/$suite/InRelease): $(grep -m1 -iE 'err|fail|could' "$check.log" || tail -n1 "$check.log")"
  fi
  rm -f "$check" "$check.log"
  if ! command -v mmdebstrap >/dev/null; then
    echo "$me: installing mmdebstrap on the host"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap </dev/null \
      || { apt-get update -q </dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap </dev/null; } \
      || die "cannot install mmdebstrap"
  fi
  # Leftovers of interrupted builds (we hold the lock, so none is running).
  for tmp in "$root".partial.*; do
    [ -e "$tmp" ] || continue
    echo "$me: removing the unfinished build $tmp"
    kill_in_root "$tmp"; unmount_all "$tmp"
    rm -rf --one-file-system "$tmp"
  done
  tmp="$root.partial.$$"
  echo "$me: building the $suite root in $tmp from $mirror (once; about 4 GB to download)"
  t0=$(date +%s)
  mounted=1  # so that the trap also clears what mmdebstrap mounted, should it be killed
  local saved_root="$root"
  root="$tmp"
  # The hook runs inside the finished root, with its apt lists and mounts still there.
  run mmdebstrap --variant=apt --components="$components" --include="$(IFS=,; echo "${packages[*]}")" \
    --customize-hook='chroot "$1" sh -ec "mkdir -p /tmp/cuda-debs && cd /tmp/cuda-debs && apt-get download -q '"${cuda_debs[*]}"' && for d in *.deb; do dpkg-deb -x \$d '"$cuda_prefix"'; done && cd / && rm -rf /tmp/cuda-debs"' \
    --customize-hook='find "$1'"$cuda_prefix"'" -name TorchConfig.cmake | sed "s|^$1||" > "$1/etc/ovf-cuda-torch-config"' \
    --customize-hook='chroot "$1" dpkg-query -W -f="\${Package} \${Version}\n" '"${packages[*]}"' > "$1/etc/ovf-packages"' \
    "$suite" "$tmp" "$mirror" \
    || { rc=$?; kill_in_root "$tmp"; unmount_all "$tmp"; rm -rf --one-file-system "$tmp"; root="$saved_root"; mounted=0
         die "mmdebstrap failed (exit $rc); nothing was cached"; }
  root="$saved_root"
  mounted=0
  [ -z "$(mounts_under "$tmp")" ] || die "mmdebstrap left mounts under $tmp"
  grep -qxF "$cuda_torch_config" "$tmp/etc/ovf-cuda-torch-config" \
    || echo "$me: warning: the CUDA LibTorch's TorchConfig.cmake is not at $cuda_torch_config but at: $(cat "$tmp/etc/ovf-cuda-torch-config")" >&2
  echo "$recipe" > "$tmp/etc/ovf-root-recipe"
  mv -T "$tmp" "$root"
  echo "$me: root ready at $root in $(( $(date +%s) - t0 )) s, $(du -sh --one-file-system "$root" | cut -f1)"
}

if [ ! -f "$root/etc/ovf-root-recipe" ]; then
  [ ! -e "$root" ] || die "$root exists but is not a finished root (no etc/ovf-root-recipe): remove it or set OVF_TRIXIE_ROOT"
  build_root
fi
echo "$me: using the $suite root $root"
[ "$root_only" = 0 ] || exit 0

# --- copy the checkout in --------------------------------------------------------------------
command -v git >/dev/null || die "git is needed to list the checkout's files"
git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1 || die "$src is not a git checkout"
# Stale mounts of a run that was killed with SIGKILL.
kill_in_root "$root"; unmount_all "$root"
dest="$root/ovf"
# The checkout goes to a fresh directory, then only files whose content changed replace
# the copies in $dest, with a new time: build/ is kept between runs, and a file given its
# checkout time could look older than a build output made from an earlier version of it.
incoming="$root/ovf.incoming"
rm -rf --one-file-system "$incoming"
mkdir -p "$dest" "$incoming"
(cd "$src" && git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do
   [ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done | tar --null -T - -cf -) | tar -xf - -C "$incoming"
changed=0
while IFS= read -r -d '' f; do
  rel="${f#"$incoming"/}"
  if ! cmp -s "$f" "$dest/$rel" 2>/dev/null; then
    mkdir -p "$(dirname "$dest/$rel")"
    rm -rf --one-file-system "${dest:?}/$rel"
    cp -P "$f" "$dest/$rel" && touch -h "$dest/$rel"
    changed=$((changed + 1))
  fi
done < <(find "$incoming" \( -type f -o -type l \) -print0)
# What the checkout no longer has goes (build/ stays).
while IFS= read -r -d '' f; do
  rel="${f#"$dest"/}"
  [ -e "$incoming/$rel" ] || [ -L "$incoming/$rel" ] || rm -f "$f"
done < <(find "$dest" -path "$dest/build" -prune -o \( -type f -o -type l \) -print0)
find "$dest" -path "$dest/build" -prune -o -type d -empty -delete 2>/dev/null || true
rm -rf --one-file-system "$incoming"
echo "$me: $(cd "$src" && git ls-files -co --exclude-standard | wc -l) files of $src in $dest ($changed changed)"

# --- mount, build, test ----------------------------------------------------------------------
mounted=1
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"; mount --make-rslave "$root/sys"
mount --rbind /dev "$root/dev"; mount --make-rslave "$root/dev"

in_root() {
  run chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    /bin/bash -c "$1"
}
t0=$(date +%s)
in_root 'cmake -S /ovf -B /ovf/build -G Ninja -DPython_EXECUTABLE=/usr/bin/python3 && ninja -C /ovf/build -j2' \
  || { rc=$?; echo "$me: the build inside the $suite root failed (exit $rc)" >&2; exit "$rc"; }
# The CUDA backend's torch glue against the real CUDA LibTorch (its files in $cuda_prefix):
# configured as a CUDA build (CMake must find libc10_cuda in that TorchConfig and say the
# glue is built), and the glue's one translation unit compiled (torch/cuda_backend.cpp, the
# only file OVF_HAVE_CUDA_GLUE changes): it must call the kernels' FrameStats and torch's
# CUDA caching allocator. Nothing runs (no GPU here, and that torch cannot be imported
# without cuDNN). The rest is the build above: the kernels with nvcc 12.4 and CUB, every
# other file against torch 2.6. Building all of libovf_torch and _ovf again here cost
# 1000 CPU-seconds of CI's 90 minutes for that one file, and a shared library's link
# leaves its dependencies' symbols unresolved anyway; the main leg links the whole CUDA
# path (pip's CUDA torch, nvcc 13). Its build tree lives under build/, kept between runs.
cuda_lib=$cuda_prefix/usr/lib/x86_64-linux-gnu
glue=runtime/CMakeFiles/ovf_torch.dir/torch/cuda_backend.cpp.o
in_root "set -o pipefail; cmake -S /ovf -B /ovf/build/cuda-libtorch -G Ninja -DPython_EXECUTABLE=/usr/bin/python3 \
    -DTorch_DIR=$cuda_lib/cmake/Torch -DCMAKE_LIBRARY_PATH=$cuda_lib -DOVF_WITH_CUDA=ON \
    | grep -F 'torch glue is built (CUDA LibTorch)' \
  && ninja -C /ovf/build/cuda-libtorch -j2 $glue \
  && nm -C /ovf/build/cuda-libtorch/$glue | grep -F ' U ovf::cuda::FrameStats::enqueue' >/dev/null \
  && nm -C /ovf/build/cuda-libtorch/$glue | grep -F ' U c10::cuda::CUDACachingAllocator::' >/dev/null" \
  || { rc=$?; echo "$me: the CUDA backend's torch glue did not build against the CUDA LibTorch (exit $rc)" >&2; exit "$rc"; }
echo "$me: the CUDA backend's torch glue built against the CUDA LibTorch"
t1=$(date +%s)
echo "$me: build inside the root: $((t1 - t0)) s"
rc=0
# Debian's interpreter has the root's torch; no venv and no wheel there (the main leg
# tests `pip install .`): the end-to-end tests run against the build tree. The benchmarks'
# smoke run is the main leg's: here it took 490 s of the 2 cores that leg shares with this
# one, and CI's 90 minutes were not enough for both (tools/test.sh runs it unless told not).
in_root 'cd /ovf && OVF_PYTHON=/usr/bin/python3 OVF_TEST_WHEEL=0 OVF_TEST_BENCH=0 bash tools/test.sh' || rc=$?
echo "$me: tests inside the $suite root: exit $rc, $(( $(date +%s) - t1 )) s"
exit "$rc"
}
