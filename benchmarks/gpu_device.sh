#!/usr/bin/env bash
# The GPU path end to end on the lent GPU machine: run from the repository root there, with
# .gpu/ (benchmarks/gpu_bundle.sh) carried along:
#
#     run(command="bash benchmarks/gpu_device.sh", carry=[".gpu"], timeout_s=600)
#
# It unpacks the bundle, makes this checkout importable as zeroforge, prints the machine,
# then runs benchmarks/gpu_run.sh for each preset (about 3.5 minutes each: start, warm-up,
# window, clean stop) and prints one table of them all. Everything goes under $OUT (8
# files at most come back): device.log, table.md, and per preset its figures (.json) and
# the run's own output (-train.log).
set -euo pipefail

usage() {
    cat <<'EOF'
usage: bash benchmarks/gpu_device.sh [options]   (from the repository root)

options:
  --presets "A B"      presets to run, in order (default: "go9-gpu gomoku15-gpu")
  --warmup S           gpu_run.sh --warmup (default: 40)
  --window S           gpu_run.sh --window (default: 60)
  --start-timeout S    gpu_run.sh --start-timeout (default: 150)
  --set SECTION.KEY=V  an override for every preset's run (repeatable)
  --no-bundle          use the Python environment this runs in (zeroforge and Ray
                       installed), not .gpu/'s bundle: the CPU test, or a machine set up
  --variants "K=V ..." before/after: each preset runs once per variant (one override
                       each), the variants back to back, e.g. --variants
                       "selfplay.batches_in_flight=1 selfplay.batches_in_flight=2"
  --keep-weights K     bring back each run's weights to judge elsewhere: its config, its
                       last K snapshots and its final checkpoint's weights, as a small
                       run directory $OUT/NAME/ (benchmarks/run_weights.py; 11.5 MiB a
                       file for resnet10x128, and at most 8 files come back)
  -h, --help           this text
environment: OUT (default: ./gpu-out), PYTHON (default: python3), ZF_SITE (where the
bundle is unpacked; default: /tmp/site), ZF_RUN_DIRS (where --keep-weights runs keep their
directories while they run; default: $TMPDIR, else /tmp)
EOF
}

die() {
    echo "gpu_device.sh: error: $1 (see benchmarks/gpu_device.sh --help)" >&2
    exit 2
}

PRESETS="go9-gpu gomoku15-gpu" WARMUP=40 WINDOW=60 START=150 VARIANTS="" BUNDLED=1 KEEP=""
SETS=()
while (($#)); do
    opt=$1
    case $opt in
        -h|--help) usage; exit 0 ;;
        --no-bundle) BUNDLED=0; shift; continue ;;
        --presets|--warmup|--window|--start-timeout|--set|--variants|--keep-weights)
            (($# >= 2)) || die "$opt needs a value"
            val=$2
            shift 2 ;;
        *) die "unknown option '$opt'" ;;
    esac
    case $opt in
        --presets) PRESETS=$val ;;
        --warmup) WARMUP=$val ;;
        --window) WINDOW=$val ;;
        --start-timeout) START=$val ;;
        --set) SETS+=(--set "$val") ;;
        --variants) VARIANTS=$val ;;
        --keep-weights) [[ $val =~ ^[0-9]+$ ]] || die "--keep-weights wants a whole number, got '$val'"
                        KEEP=$val ;;
    esac
done
[[ -f benchmarks/gpu_run.sh && -d shared ]] || die "run it from the repository root"
PY=${PYTHON:-python3}
OUT=${OUT:-$PWD/gpu-out}
SITE=${ZF_SITE:-/tmp/site}
TAG=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
BUNDLE=".gpu/site-$TAG.tar.xz"
((BUNDLED == 0)) || [[ -f $BUNDLE ]] \
    || die "no $BUNDLE: build it with benchmarks/gpu_bundle.sh and carry .gpu"
mkdir -p "$OUT"
RUN_DIRS=$(mktemp -d "${ZF_RUN_DIRS:-${TMPDIR:-/tmp}}/zf-gpu-runs.XXXXXX")
trap 'rm -rf "$RUN_DIRS"' EXIT
LOG="$OUT/device.log"
exec > >(tee -a "$LOG") 2>&1

if ((BUNDLED)); then
    mkdir -p "$SITE"
    # Python's own tarfile: no xz binary needed there; the "tar" filter keeps the modes
    # (redis-server and Ray's daemons must stay executable)
    "$PY" - "$BUNDLE" "$SITE" <<'EOF2'
import sys
import tarfile

with tarfile.open(sys.argv[1]) as tar:
    tar.extractall(sys.argv[2], filter="tar")
EOF2
    # The package's parts are folders at the top of the repository (pyproject's
    # package-dir); these are the links a development checkout has under zeroforge/
    # (git-ignored, so they do not travel).
    for part in shared actors learner deploy; do ln -sfn "../$part" "zeroforge/$part"; done
    export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1

echo "== machine"
nvidia-smi || true
echo "cores: $(nproc)"; df -h /dev/shm /tmp 2>/dev/null || true
((BUNDLED == 0)) || head -n 1 "$SITE/ZEROFORGE_BUNDLE.txt"
"$PY" - <<'EOF'
import platform

import numba
import numpy
import ray
import torch

import zeroforge
from zeroforge.shared.transport.server import find_binary

print(f"python {platform.python_version()}, torch {torch.__version__} (CUDA "
      f"{torch.version.cuda}, {torch.cuda.device_count()} GPU), ray {ray.__version__}, "
      f"numpy {numpy.__version__}, numba {numba.__version__}, zeroforge from "
      f"{zeroforge.__file__}, redis-server {find_binary()}")
EOF

GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
RUNS=()
for preset in $PRESETS; do RUNS+=("$preset 1"); done
# R=2: a second learner replica on a second GPU, where both exist (learner.replicas is
# new: older checkouts have no such key)
if ((GPUS >= 2)) && "$PY" -c 'import dataclasses, sys
from zeroforge.learner.config import LearnerConfig
sys.exit("replicas" not in {f.name for f in dataclasses.fields(LearnerConfig)})'; then
    for preset in $PRESETS; do RUNS+=("$preset 2"); done
fi

for variant in $VARIANTS; do
    [[ $variant == ?*=* ]] || die "--variants wants SECTION.KEY=VALUE words, got '$variant'"
done
for spec in "${RUNS[@]}"; do
    read -r preset replicas <<<"$spec"
    base=$preset
    ((replicas == 1)) || base="$preset-r$replicas"
    # no variants: one run as the preset stands; else one run per variant, back to back
    for variant in ${VARIANTS:-"-"}; do
        name=$base
        extra=()
        if [[ $variant != "-" ]]; then
            key=${variant%%=*}
            name="$base-${key##*.}-${variant#*=}"
            extra=(--set "$variant")
        fi
        # a run dir of our own only to take its weights from: gpu_run.sh removes its own
        kept=()
        [[ -z $KEEP ]] || kept=(--run-dir "$RUN_DIRS/$name")
        echo "== $name"
        bash benchmarks/gpu_run.sh --python "$PY" --preset "$preset" --replicas "$replicas" \
            --warmup "$WARMUP" --window "$WINDOW" --start-timeout "$START" "${SETS[@]}" \
            "${extra[@]}" "${kept[@]}" --json "$OUT/$name.json" --log "$OUT/$name-train.log" \
            || echo "gpu_device: $name failed (its last lines are above; $name-train.log)"
        if [[ -n $KEEP ]]; then
            "$PY" benchmarks/run_weights.py "$RUN_DIRS/$name" "$OUT/$name" --snapshots "$KEEP" \
                || echo "gpu_device: $name's weights not kept (the line above says why)"
            rm -rf "${RUN_DIRS:?}/$name"
        fi
    done
done

echo "== table"
shopt -s nullglob
figures=("$OUT"/*.json)
if ((${#figures[@]} == 0)); then
    echo "gpu_device: no run was measured"
    exit 1
fi
"$PY" benchmarks/gpu_run_report.py table --table-only "${figures[@]}" | tee "$OUT/table.md"
