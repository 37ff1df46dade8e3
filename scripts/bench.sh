#!/usr/bin/env bash
# Benchmarks pyrun-mcp (release build) against raw python and a FastMCP baseline, in one sitting,
# and prints a markdown table. Not part of the test suite.
#
#   bash scripts/bench.sh [--quick] [--no-baseline] [--no-numpy] [--write docs/benchmarks.md]
#   bash scripts/bench.sh --detail [--quick] [--no-baseline]
#   bash scripts/bench.sh --warm [--quick]
#
# The default is the one current table (docs/benchmarks.md opens with it; --write puts it there,
# between the page's bench-table markers): every pattern with warm runs on (the default) and
# --warm off, interleaved, beside raw /usr/bin/python3 (the venv's python for numpy+pandas) and a
# FastMCP baseline; an assistant's pace; CPU per call; server memory. About 8 minutes (--quick:
# about 3, fewer calls: a first look, not figures to quote).
# --detail: every other figure (start-up, list_packages, load with the raw ceiling, memory under
# load, 100 MB of output, the sandbox's cost, OAuth, background runs, Python sessions).
# --warm: warm runs in detail (issue 30's rows: cadence, back to back, memory, the fork limit).
#
# The FastMCP baseline and the numpy+pandas venv are made on first use under the build folder
# (pip, from PyPI); --no-baseline and --no-numpy leave them out.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=table quick=0 baseline=1 numpy=1 write=""
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --no-baseline) baseline=0 ;;
    --no-numpy) numpy=0 ;;
    --detail) mode=detail ;;
    --warm) mode=warm ;;
    --write) write="$2"; shift ;;
    *) echo "usage: $0 [--detail | --warm] [--quick] [--no-baseline] [--no-numpy] [--write FILE]" >&2; exit 2 ;;
  esac
  shift
done

target=${CARGO_TARGET_DIR:-target}
cargo build --release -p pyrun-mcp-server -p pyrun-mcp-bench >&2

# Debian's interpreter starts faster than a pyenv shim: the floor every ratio is against.
python=python3
[[ -x /usr/bin/python3 ]] && python=/usr/bin/python3
args=(--server-bin "$target/release/pyrun-mcp-server" --projects python_projects --python "$python")

# A venv with numpy and pandas (the test workload venv when it is there), and its base interpreter.
workload_args() {
  local venv=$target/test-deps/workload
  if [[ ! -x $venv/bin/python ]]; then
    venv=$target/bench-np-venv
    if [[ ! -x $venv/bin/python ]]; then
      echo "creating $venv with numpy and pandas…" >&2
      "$python" -m venv "$venv"
      grep -E '^(numpy|pandas)==' tests/clients/workload-requirements.txt >"$venv/requirements.txt"
      "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        -r "$venv/requirements.txt" >&2 || { rm -rf "$venv"; return 1; }
    fi
  fi
  local base
  base=$(sed -n "s/^executable = //p" "$venv/pyvenv.cfg")
  [[ -n $base ]] || return 1
  args+=(--workload-venv "$venv" --workload-python "$base")
}

case $mode in
  table)
    args+=(--table)
    ((quick)) && args+=(--quick)
    if ((numpy)) && ! workload_args; then
      echo "no numpy+pandas venv: those rows are left out" >&2
    fi
    [[ -n $write ]] && args+=(--write-into "$write")
    ;;
  warm)
    args+=(--warm)
    workload_args || echo "no numpy+pandas venv: those rows are left out" >&2
    if ((quick)); then
      args+=(--warm-calls 10 --warm-memory-runs 200 --workload-calls 5 --calls 30)
    else
      args+=(--calls 100)
    fi
    baseline=0
    ;;
  detail)
    ((quick)) && args+=(--calls 50 --startups 10 --load-secs 3 --idle-sessions 200)
    ;;
esac
if ((baseline)); then
  venv=$target/bench-venv
  if [[ ! -x $venv/bin/python ]]; then
    echo "creating $venv with fastmcp for the baseline…" >&2
    python3 -m venv "$venv"
    # The fastmcp the real-client tests pin (the newest may not install).
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      -r tests/clients/requirements.txt >&2
  fi
  args+=(--fastmcp-python "$venv/bin/python")
fi

if [[ -n $write && $mode != table ]]; then
  "$target/release/pyrun-mcp-bench" "${args[@]}" | tee "$write"
else
  "$target/release/pyrun-mcp-bench" "${args[@]}"
fi
