#!/usr/bin/env bash
# Added latency of the sandbox per run (--sandbox standard vs off), median of N runs of a hello-world
# script spawned exactly as the runner does. Release build. Not part of the test suite.
#
#   bash scripts/bench-sandbox.sh [--runs N] [--python PATH] [--no-cgroups]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet --release -p pyrun-sandbox --example bench_sandbox -- "$@"
