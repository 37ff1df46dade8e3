# Added latency of the sandbox per run (--sandbox standard vs off); see bench-sandbox.sh.
# On Windows the sandbox is a Job Object assigned after spawn, so there is nothing to measure here.
#
#   pwsh scripts/bench-sandbox.ps1 [--runs N] [--python PATH] [--no-cgroups]
$ErrorActionPreference = "Stop"
Set-Location (Join-Path $PSScriptRoot "..")
cargo run --quiet --release -p pyrun-sandbox --example bench_sandbox -- @args
