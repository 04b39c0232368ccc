#!/usr/bin/env bash
# The GPU path end to end: one distributed `zeroforge train` (Ray actors, Redis, inference
# servers, the learner) for a few minutes, measured through its own metrics, then stopped
# cleanly; prints one markdown table and a JSON line of the same figures. The same code
# paths run on a CPU-only machine (the GPU columns then say n/a), which is how CI tests it
# (tests/e2e/test_gpu_run_script.py). docs/lab/gpu.md, "The GPU path end to end".
set -euo pipefail

usage() {
    cat <<'EOF'
usage: benchmarks/gpu_run.sh [options]

Start `zeroforge train --config PRESET` (distributed: Ray + Redis, started for you) under
a unique run id and its own run dir, wait until every actor runs, warm up, measure a
window, stop the run cleanly (`zeroforge stop`) and print one table: self-play
positions/s, inference evaluations/s, batch fill, request latency p50/p99, learner
steps/s, samples per insert, GPU utilisation and memory (nvidia-smi once a second; n/a
without it). Everything the script started is ended on exit, Ctrl-C or failure.

options:
  --preset NAME|FILE     config preset or file (default: go9-gpu)
  --warmup S             seconds of warm-up once every actor runs (default: 60); the
                         window also waits for the learner's first step
  --window S             seconds measured (default: 90)
  --start-timeout S      longest wait for the run to get going, and again for the
                         learner's first step (default: 300)
  --minutes M            the run's own time limit, a backstop should this script be
                         killed (default: start timeout twice + warm-up + window + 3 min)
  --replicas R           learner replicas: R > 1 passes --set learner.replicas=R
                         (default: 1)
  --set SECTION.KEY=V    a config override for zeroforge train (repeatable)
  --json PATH            also write the figures as JSON to PATH
  --log PATH             keep the run's output (zeroforge train) at PATH
  --run-dir DIR          the run's directory (default: a temporary one, removed at the end)
  --python PY            the Python with zeroforge (default: $PYTHON, else python3)
  -h, --help             this text

examples:
  benchmarks/gpu_run.sh --preset go9-gpu --json go9.json
  benchmarks/gpu_run.sh --preset gomoku15-gpu --set distributed.inference_servers=1
EOF
}

die() {  # a bad command line: one line, exit 2
    echo "gpu_run.sh: error: $1 (see benchmarks/gpu_run.sh --help)" >&2
    exit 2
}

number() {  # number NAME VALUE: VALUE must be a non-negative number
    [[ $2 =~ ^[0-9]+([.][0-9]+)?$ ]] || die "$1 wants a number, got '$2'"
}

PRESET=go9-gpu WARMUP=60 WINDOW=90 START_TIMEOUT=300 MINUTES="" REPLICAS=1
JSON="" LOG="" RUN_DIR="" PY=${PYTHON:-python3}
SETS=()
while (($#)); do
    opt=$1
    case $opt in
        -h|--help) usage; exit 0 ;;
        --preset|--warmup|--window|--start-timeout|--minutes|--replicas|--set|--json|--log|\
        --run-dir|--python)
            (($# >= 2)) || die "$opt needs a value"
            val=$2
            shift 2 ;;
        *) die "unknown option '$opt'" ;;
    esac
    case $opt in
        --preset) PRESET=$val ;;
        --warmup) number "$opt" "$val"; WARMUP=$val ;;
        --window) number "$opt" "$val"; WINDOW=$val ;;
        --start-timeout) number "$opt" "$val"; START_TIMEOUT=$val ;;
        --minutes) number "$opt" "$val"; MINUTES=$val ;;
        --replicas) [[ $val =~ ^[1-9][0-9]*$ ]] || die "--replicas wants a count >= 1, got '$val'"
                    REPLICAS=$val ;;
        --set) [[ $val == ?*=* ]] || die "--set wants SECTION.KEY=VALUE, got '$val'"
               SETS+=("$val") ;;
        --json) JSON=$val ;;
        --log) LOG=$val ;;
        --run-dir) RUN_DIR=$val ;;
        --python) PY=$val ;;
    esac
done
command -v "$PY" >/dev/null || die "no python '$PY' (pass --python)"
command -v setsid >/dev/null || die "no setsid (util-linux) on PATH"
awk -v w="$WINDOW" 'BEGIN { exit !(w > 0) }' || die "--window must be > 0"
if ((REPLICAS > 1)); then
    SETS+=("learner.replicas=$REPLICAS")
fi
if [[ -z $MINUTES ]]; then
    # never reached when all goes well (the script stops the run after its window): the
    # run's own limit only ends a run whose script was killed outright
    MINUTES=$(awk -v s="$START_TIMEOUT" -v w="$WARMUP" -v m="$WINDOW" \
                  'BEGIN { printf "%.1f", (2 * s + w + m + 180) / 60 }')
fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPORT="$HERE/gpu_run_report.py"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zf-gpu-run.XXXXXX")
RUN_ID="gpu-run-$(date -u +%Y%m%dT%H%M%S)-$$-$RANDOM"
[[ -n $RUN_DIR ]] || RUN_DIR="$WORK/run"
TRAIN_LOG="$WORK/train.log"
PIDS="$WORK/pids"
FIGURES="$WORK/figures.json"
SET_ARGS=()
for s in "${SETS[@]}"; do SET_ARGS+=(--set "$s"); done
TRAIN_PID=""

driver_alive() { [[ -n $TRAIN_PID ]] && kill -0 "$TRAIN_PID" 2>/dev/null; }

wait_driver() {  # wait_driver SECONDS: true once the driver has ended
    local i
    for ((i = 0; i < $1; i++)); do
        driver_alive || return 0
        sleep 1
    done
    ! driver_alive
}

stop_run() {
    driver_alive || return 0
    "$PY" "$REPORT" remember --pid "$TRAIN_PID" --pids "$PIDS" || true
    echo "gpu_run: stopping run $RUN_ID cleanly (final checkpoint)" >&2
    # the clean way first: the controller drains the workers, the learner checkpoints
    # (this fails at once when the run has not written its record yet)
    if timeout 180 "$PY" -m zeroforge stop --run-dir "$RUN_DIR" >>"$TRAIN_LOG" 2>&1; then
        wait_driver 120 && return 0
    fi
    # the driver's own Ctrl-C handling (a clean stop too), then the whole session it leads
    echo "gpu_run: zeroforge stop did not end the run; interrupting its driver" >&2
    kill -INT "$TRAIN_PID" 2>/dev/null || true
    wait_driver 60 && return 0
    kill -KILL -- "-$TRAIN_PID" 2>/dev/null || true
    wait_driver 10 || true
}

cleanup() {
    local rc=$?
    trap - EXIT
    trap '' INT TERM  # a second Ctrl-C must not cut the clean-up short
    stop_run
    if [[ -n $TRAIN_PID ]]; then
        wait "$TRAIN_PID" 2>/dev/null || true
        # whatever the driver left behind (Redis, Ray's processes) is ended by pid
        "$PY" "$REPORT" reap --pids "$PIDS" || true
    fi
    if ((rc != 0)) && [[ -s $TRAIN_LOG ]]; then
        echo "gpu_run: the run's last lines ($TRAIN_LOG):" >&2
        tail -n 40 "$TRAIN_LOG" >&2 || true
    fi
    if [[ -n $LOG ]]; then cp "$TRAIN_LOG" "$LOG" 2>/dev/null || true; fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "gpu_run: starting run $RUN_ID (--config $PRESET${SETS[*]:+ --set ${SETS[*]}}) in $RUN_DIR" >&2
# In its own session: Ctrl-C in this terminal reaches the script, which stops the run
# cleanly, and not the run's processes directly. A non-interactive shell's background job
# is no process group leader, so setsid(1) execs in place and $! is the session leader.
setsid "$PY" -m zeroforge train --config "$PRESET" --run-id "$RUN_ID" --run-dir "$RUN_DIR" \
    --minutes "$MINUTES" "${SET_ARGS[@]}" </dev/null >"$TRAIN_LOG" 2>&1 &
TRAIN_PID=$!

"$PY" "$REPORT" measure --run-dir "$RUN_DIR" --run-id "$RUN_ID" --train-pid "$TRAIN_PID" \
    --python "$PY" --warmup "$WARMUP" --window "$WINDOW" --start-timeout "$START_TIMEOUT" \
    --preset "$PRESET" --replicas "$REPLICAS" "${SET_ARGS[@]}" --pids "$PIDS" \
    --out "$FIGURES"
stop_run
wait "$TRAIN_PID" || echo "gpu_run: the run's driver exited with code $? (see --log)" >&2
"$PY" "$REPORT" reap --pids "$PIDS"
TRAIN_PID=""  # ended and reaped: nothing left for the clean-up to do
"$PY" "$REPORT" table "$FIGURES" ${JSON:+--json "$JSON"}
