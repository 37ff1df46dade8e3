#!/usr/bin/env bash
# The one test command (README and .ci/run call exactly `bash scripts/test.sh`): formatting, one
# lint pass with every feature on, a compile check for Windows and macOS, the publish dry run,
# then one build and one `cargo test --workspace` with the tunnel and the real-client tests on
# (official SDKs, Inspector, conformance suite, nginx, chromium, the MCP Apps test host, the
# scripts), and a closing summary with each step's time and the test count. The map's checks
# (crate layers, MCP rooms, ARCHITECTURE.md's paths and names, entry and test-binary counts) are
# the tidy test that `cargo test` runs (tests/src/tidy/).
# Real-client tests install what they need (Python venv, Node tools, the MCP Apps test host bundled
# with esbuild; npm and node on PATH) under target/test-deps/.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
summary=()
log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT

# Runs one named step; records its outcome and time, and stops the run on the first failure.
step() {
    local name=$1
    shift
    local t0=$SECONDS
    echo "==> $name: $*"
    if "$@"; then
        summary+=("ok      $name ($((SECONDS - t0)) s)")
    else
        summary+=("FAILED  $name ($((SECONDS - t0)) s)")
        print_summary
        exit 1
    fi
}

print_summary() {
    echo
    echo "==> summary"
    printf '    %s\n' "${summary[@]}"
    echo "    wall time: $((SECONDS - started)) s"
}

# Cross-target compile checks, one cargo run for every target whose standard library can be had
# (each is skipped, and said so, when `rustup target add` fails): in one run the two targets'
# crates share the cores, so neither run's tail (a last crate checking alone) leaves one idle.
cross_check() {
    local target var names=() targets=() envs=()
    # A type check links nothing, so the C that build scripts compile (ring's, for TLS) goes to a
    # stand-in compiler that says it is gcc and writes empty objects: no C cross-compiler needed.
    # SQLite (rusqlite's bundled C) is declared a system library instead of compiled.
    local cc="$log_dir/typecheck-cc"
    cat >"$cc" <<'CC'
#!/bin/sh
prev=
for arg in "$@"; do
    case $arg in
    -E) echo '"gcc"' ;;
    -\?) exit 1 ;;
    esac
    if [ "$prev" = -o ]; then : >"$arg"; fi
    prev=$arg
done
CC
    chmod +x "$cc"
    for target in "$@"; do
        if ! rustup target add "$target" >"$log_dir/rustup.log" 2>&1; then
            echo "skipped: rustup target add $target failed: $(tail -n 1 "$log_dir/rustup.log")"
            summary+=("skipped cargo check --target $target (rustup target add failed)")
            continue
        fi
        var=${target//-/_}
        envs+=("CC_$var=$cc" "AR_$var=ar")
        targets+=(--target "$target")
        names+=("$target")
    done
    ((${#names[@]} > 0)) || return 0
    step "cargo check --target ${names[*]}" env "${envs[@]}" LIBSQLITE3_SYS_USE_PKG_CONFIG=1 \
        cargo check --workspace --all-targets "${targets[@]}"
}

# The GitHub workflows for people who fork, checked against GitHub's workflow schema with
# check-jsonschema (pinned, from PyPI, in a venv of its own; its schema ships with it).
check_workflows() {
    local venv=target/ci-tools
    if [[ ! -x $venv/bin/check-jsonschema ]]; then
        python3 -m venv "$venv" &&
            "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
                'check-jsonschema==0.39.0' || return 1
    fi
    "$venv/bin/check-jsonschema" --builtin-schema vendor.github-workflows .github/workflows/*.yml
}

# uv for the install tests (server/tests/install_packages.rs), pinned, from PyPI, in a venv of its
# own under target/test-deps/; exported as PYRUN_TEST_UV. Without it (offline) those tests use the
# pip fallback only and say why.
UV_VERSION=0.9.5
ensure_uv() {
    local venv=target/test-deps/uv
    if [[ ! -x $venv/bin/uv ]] || [[ $("$venv/bin/uv" --version 2>/dev/null) != "uv $UV_VERSION" ]]; then
        rm -rf "$venv"
        if ! { python3 -m venv "$venv" &&
            "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"; }; then
            echo "uv $UV_VERSION could not be installed: the install tests use pip only"
            summary+=("skipped uv for the install tests (pip install uv==$UV_VERSION failed)")
            return 0
        fi
    fi
    PYRUN_TEST_UV=$(cd "$venv/bin" && pwd)/uv
    export PYRUN_TEST_UV
}

# The whole suite is one build: every crate with the features the suite exercises (the ngrok
# tunnel, which scripts/setup's release build ships, and the real-client tests), so the binaries
# the tests start, the tests themselves and the libraries they link are built once.
TEST_FEATURES=pyrun-mcp-server/tunnel,pyrun-mcp-tests/real-clients

# What the tests run but do not build (no nested cargo): every workspace binary (`--all-targets`
# builds exactly what `cargo test` then reuses), and `pyrun-mcp-conformance-server`, the server
# with its test-only conformance fixtures under another name (its own `[[bin]]`, which requires
# the feature), so the normal binary never carries them.
build_for_tests() {
    cargo build --workspace --all-targets --features "$TEST_FEATURES" &&
        cargo build -p pyrun-mcp-server --features conformance,tunnel --bin pyrun-mcp-conformance-server
}

# cargo test, with its output kept to count the results for the summary (every binary runs, so one
# failure does not hide the others): the hermetic tests (loopback only) and the real-client tests
# (official SDKs, Inspector, conformance suite, nginx, chromium, the scripts). The real clients'
# binary spends its time waiting on the programs it drives, as the server's integration binary
# waits on the servers it starts: the first runs beside everything else instead of after it (its
# output is printed when both are done). It runs as cargo would run it (from its package folder),
# the very executable the build made: its path comes from cargo, which builds nothing here.
# The plot test (server/tests/artifacts.rs) fails here without matplotlib, instead of skipping.
REAL_CLIENTS=real_clients
run_tests() {
    local features=(--workspace --no-fail-fast --features "$TEST_FEATURES")
    local real_clients others
    real_clients=$(cargo test "${features[@]}" --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$REAL_CLIENTS") || return 1
    [[ -x $real_clients ]] || { echo "no $REAL_CLIENTS test executable"; return 1; }
    # Every other test target, named from cargo's metadata (a new one is never left out).
    others=$(cargo metadata --format-version 1 --no-deps --all-features |
        python3 -c 'import json, sys
m = json.load(sys.stdin)
print(" ".join("--test " + t["name"] for p in m["packages"] for t in p["targets"]
               if "test" in t["kind"] and t["name"] != sys.argv[1]))' "$REAL_CLIENTS") || return 1
    (cd tests && PYRUN_REQUIRE_MATPLOTLIB=1 "$real_clients") >"$log_dir/real_clients.log" 2>&1 &
    local lane=$! status=0 lane_status=0
    # shellcheck disable=SC2086 # $others is a list of flags
    # (A step runs in an `if`: a failing command here does not end the script.)
    PYRUN_REQUIRE_MATPLOTLIB=1 cargo test "${features[@]}" --lib --bins $others 2>&1 |
        tee "$log_dir/test.log"
    status=${PIPESTATUS[0]}
    cargo test "${features[@]}" --doc 2>&1 | tee -a "$log_dir/test.log"
    ((PIPESTATUS[0] == 0)) || status=1
    wait "$lane" || lane_status=$?
    echo "     Running $REAL_CLIENTS (beside the rest)"
    tee -a "$log_dir/test.log" <"$log_dir/real_clients.log"
    ((lane_status == 0)) || echo "$REAL_CLIENTS failed (exit $lane_status)"
    ((status == 0 && lane_status == 0))
}

# The browser the consent-page test drives (tests/tests/consent_browser.rs): Debian's chromium and
# its WebDriver, from apt when missing (we run as root in CI; nothing is downloaded at test time),
# or the programs PYRUN_TEST_CHROMIUM and PYRUN_TEST_CHROMEDRIVER name.
ensure_browser() {
    local chromium=${PYRUN_TEST_CHROMIUM:-/usr/bin/chromium}
    local driver=${PYRUN_TEST_CHROMEDRIVER:-/usr/bin/chromedriver}
    if [[ -x $chromium && -x $driver ]]; then
        return 0
    fi
    if [[ -n ${PYRUN_TEST_CHROMIUM:-}${PYRUN_TEST_CHROMEDRIVER:-} ]]; then
        echo "PYRUN_TEST_CHROMIUM ($chromium) and PYRUN_TEST_CHROMEDRIVER ($driver) must both" \
            "name programs"
        return 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "chromium and chromedriver are missing and apt-get is not available: install them" \
            "(Debian/Ubuntu: apt-get install -y chromium chromium-driver) and run again"
        return 1
    fi
    if [[ $(id -u) -ne 0 ]]; then
        echo "chromium and chromedriver are missing: run" \
            "\`sudo apt-get install -y chromium chromium-driver\` and run again"
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    local apt=(apt-get -o DPkg::Lock::Timeout=300 -y -q)
    "${apt[@]}" install chromium chromium-driver ||
        { "${apt[@]}" update && "${apt[@]}" install chromium chromium-driver; }
}

# tmux, the terminal the interactive menu's test drives (tests/tests/client_first_day.rs): Debian's
# package from apt when missing (as root).
ensure_tmux() {
    if command -v tmux >/dev/null 2>&1; then
        return 0
    fi
    if ! command -v apt-get >/dev/null 2>&1 || [[ $(id -u) -ne 0 ]]; then
        echo "tmux is missing: install it (Debian/Ubuntu: apt-get install -y tmux) and run again"
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    local apt=(apt-get -o DPkg::Lock::Timeout=300 -y -q)
    "${apt[@]}" install tmux || { "${apt[@]}" update && "${apt[@]}" install tmux; }
}

# matplotlib for the plot test (server/tests/artifacts.rs): Debian's python3-matplotlib for
# /usr/bin/python3, from apt when missing (as root), unless the tests' interpreter has it.
ensure_matplotlib() {
    local python=${PYRUN_TEST_PYTHON:-python3}
    if "$python" -c 'import matplotlib' 2>/dev/null || /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
        return 0
    fi
    if ! command -v apt-get >/dev/null 2>&1 || [[ $(id -u) -ne 0 ]]; then
        echo "matplotlib is missing: install it for $python (pip install matplotlib) or" \
            "run \`sudo apt-get install -y python3-matplotlib\` and run again"
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    local apt=(apt-get -o DPkg::Lock::Timeout=300 -y -q)
    "${apt[@]}" install python3-matplotlib ||
        { "${apt[@]}" update && "${apt[@]}" install python3-matplotlib; }
}

# A fresh target folder (a new clone, CI) gains nothing from incremental compilation: its caches
# cost build time and disk and would never be read again.
if [[ ! -d ${CARGO_TARGET_DIR:-target}/debug ]]; then
    export CARGO_INCREMENTAL=0
fi

step "cargo fmt --check" cargo fmt --all -- --check
# One lint pass, with every feature on: what compiles only with a feature (the test-only
# conformance fixtures, the ngrok tunnel, the real-client tests) is linted with the rest. The
# little that compiles only without one (`cfg(not(feature = "tunnel"))`: the tunnel's "not
# built" answer and its test) is type-checked by the cross checks below, which build the
# default features. A check only: it builds no binary.
step "cargo clippy --all-features" cargo clippy --workspace --all-targets --all-features -- -D warnings
step "GitHub workflows (schema)" check_workflows
if command -v rustup >/dev/null 2>&1; then
    cross_check x86_64-pc-windows-gnu x86_64-apple-darwin
else
    summary+=("skipped cross-target checks (no rustup)")
fi
# The crates publish (api, sandbox, run, server, client): packaged, their manifests and
# dependencies checked, without building them again from their packages (a second full build of
# the workspace with other feature sets; the suite builds the same code once below).
step "cargo publish --dry-run" cargo publish --workspace --dry-run --no-verify --allow-dirty --quiet
step "matplotlib for the plot test" ensure_matplotlib
ensure_uv
step "chromium for the browser tests" ensure_browser
step "tmux for the interactive client test" ensure_tmux
step "cargo build (the suite's binaries)" build_for_tests
step "cargo test --workspace --features $TEST_FEATURES" run_tests

passed=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed' "$log_dir/test.log" | awk '{s += $4} END {print s + 0}')
failed=$(grep -Eo '[0-9]+ failed;' "$log_dir/test.log" | awk '{s += $1} END {print s + 0}')
print_summary
echo "tests: $passed passed, $failed failed"
