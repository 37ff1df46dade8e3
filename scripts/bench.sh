#!/usr/bin/env bash
# Benchmarks pyrun-mcp (release build) against raw python and a FastMCP baseline, in one run, and
# prints a markdown table. Not part of the test suite.
#
#   bash scripts/bench.sh [--quick] [--no-baseline] [--warm] [--write docs/benchmarks.md]
#
# --warm measures warm runs only (issue 30): run_python in a pre-started spare against --warm off
# and the raw spawn, hello_world.py with /usr/bin/python3 and a numpy+pandas script in the test
# workload venv (target/test-deps/workload, when built), CPU and memory per run, the fork limit.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0 baseline=1 warm=0 write=""
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --no-baseline) baseline=0 ;;
    --warm) warm=1 ;;
    --write) write="$2"; shift ;;
    *) echo "usage: $0 [--quick] [--no-baseline] [--warm] [--write FILE]" >&2; exit 2 ;;
  esac
  shift
done

cargo build --release -p pyrun-mcp-server -p pyrun-mcp-bench >&2

args=(--server-bin target/release/pyrun-mcp-server --projects python_projects)
if ((warm)); then
  args+=(--warm --python /usr/bin/python3)
  workload=target/test-deps/workload
  base=$(sed -n "s/^executable = //p" "$workload/pyvenv.cfg" 2>/dev/null || true)
  if [[ -x $workload/bin/python && -n $base ]]; then
    args+=(--workload-venv "$workload" --workload-python "$base")
  else
    echo "no $workload: the numpy+pandas rows are left out" >&2
  fi
  if ((quick)); then
    args+=(--warm-calls 10 --warm-memory-runs 200 --workload-calls 5 --calls 30)
  else
    args+=(--calls 100)
  fi
  baseline=0
elif ((quick)); then
  args+=(--calls 50 --startups 10 --load-secs 3 --idle-sessions 200)
fi
if ((baseline)); then
  venv=target/bench-venv
  if [[ ! -x $venv/bin/python ]]; then
    echo "creating $venv with fastmcp for the baseline…" >&2
    python3 -m venv "$venv"
    # The fastmcp the real-client tests pin (the newest may not install).
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      -r tests/clients/requirements.txt >&2
  fi
  args+=(--fastmcp-python "$venv/bin/python")
fi

if [[ -n $write ]]; then
  target/release/pyrun-mcp-bench "${args[@]}" | tee "$write"
else
  target/release/pyrun-mcp-bench "${args[@]}"
fi
