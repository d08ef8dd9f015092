#!/usr/bin/env bash
# Builds inflight + inflight-demo-eval (RelWithDebInfo, build-bench/) if needed
# and runs every benchmark in bench/. Each prints its figures and RATIO lines;
# none asserts absolute timings. Takes ~5 min (cpu_ticks measures for 60 s,
# thousand_runs holds 200 children and 1,000 runs).
# The checkpoint benchmarks need the git CLI (git daemon) on PATH. The scripts
# import the test support package tests/support/inflight_testing, put on
# PYTHONPATH here; to run one by hand: tests/support/python bench/NAME.py.
#   INFLIGHT_BUILD_DIR  build dir (default <repo>/build-bench)
#   BENCH_CPU_WINDOW    cpu_ticks window in seconds (default 60)
#   BENCH_REPS          shutdown_latency repetitions (default 5)
#   BENCH_IDLE_SECONDS  idle_rss idle window (default 3)
#   BENCH_PUSH_REPS     checkpoint_push repetitions (default 5)
#   BENCH_IDLE_CONNS    idle_connections counts (default 1000,5000)
#   BENCH_THOUSAND_ARGS thousand_runs options (default: 200 running, 1,000 runs,
#                       ~1 min, ~400 more processes; e.g. "--running 20 --queued 100")
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
build="${INFLIGHT_BUILD_DIR:-$repo/build-bench}"
export INFLIGHT_BUILD_DIR="$build"
export PYTHONPATH="$repo/tests/support"

if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS=-Wno-error=format-truncation
fi
if ! ninja -C "$build" -j1 inflight inflight-demo-eval tick_nochange_bench \
  pack_index_bench; then
  if [[ -x "$build/bin/inflight" && -x "$build/bin/inflight-demo-eval" ]]; then
    echo "run_all.sh: build failed; benchmarking the binaries already in $build/bin" >&2
  else
    exit 1
  fi
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"  # serve is started from temp cwds; keep this one out of the repo
status=0
for b in idle_rss idle_connections cpu_ticks shutdown_latency checkpoint_push periodic_bytes \
  pushes_per_interval rollout_pushes shutdown_push_latency restore_latency first_push_latency \
  periodic_save_cpu runs_list publish_latency pack_index; do
  echo "== $b"
  /usr/bin/python3 "$repo/bench/$b.py" || { echo "$b: FAILED (exit $?)"; status=1; }
  echo
done
echo "== thousand_runs"
# shellcheck disable=SC2086  # the options are words
/usr/bin/python3 "$repo/bench/thousand_runs.py" ${BENCH_THOUSAND_ARGS:-} ||
  { echo "thousand_runs: FAILED (exit $?)"; status=1; }
echo

echo "== tick_nochange"
if [[ -x "$build/bin/tick_nochange_bench" ]]; then
  "$build/bin/tick_nochange_bench" || { echo "tick_nochange: FAILED (exit $?)"; status=1; }
else
  echo "tick_nochange: FAILED ($build/bin/tick_nochange_bench not built)"; status=1
fi
exit $status
