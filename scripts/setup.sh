#!/usr/bin/env bash
# One-time setup: checks Rust and Python, builds the release binaries (with the ngrok tunnel), and
# creates .env from .env.example with a freshly generated MCP_AUTH_TOKEN. An existing .env is
# never overwritten.
#
#   scripts/setup.sh [--skip-build]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

build=1
case ${1-} in
--skip-build) build=0 ;;
-h | --help) sed -n '2,6p' "$0"; exit 0 ;;
"") ;;
*) die "unknown option '$1' (see --help)" ;;
esac

python=""
for candidate in python3 python; do
    if command -v "$candidate" >/dev/null 2>&1 &&
        "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 8))' 2>/dev/null; then
        python=$candidate
        break
    fi
done
[[ -n "$python" ]] || die "Python 3.8 or newer not found on PATH
hint: install it (https://www.python.org/downloads/ or your package manager)"
echo "ok  $("$python" --version 2>&1) ($(command -v "$python"))"

if ((build)); then
    command -v cargo >/dev/null 2>&1 || die "cargo not found on PATH
hint: install Rust from https://rustup.rs, then open a new shell"
    echo "ok  $(cargo --version)"
    echo "building the release binaries (a few minutes the first time)..."
    (cd "$ROOT" && cargo build --release --workspace --features pyrun-mcp-server/tunnel)
    echo "ok  $ROOT/target/release/pyrun-mcp-server$EXE"
fi

if [[ -f "$ENV_FILE" ]]; then
    echo "ok  kept the existing $ENV_FILE"
    [[ -n "$(env_value MCP_AUTH_TOKEN)" ]] ||
        hint "it sets no MCP_AUTH_TOKEN: a public URL (tunnel) needs one"
else
    [[ -f "$ROOT/.env.example" ]] || die "no .env.example in $ROOT"
    token=$("$python" -c 'import secrets; print(secrets.token_hex(32))')
    umask 077
    # The MCP_AUTH_TOKEN line of the example (commented out or not) gets the new token.
    awk -v token="$token" '
        /^[#[:space:]]*MCP_AUTH_TOKEN[[:space:]]*=/ && !done { print "MCP_AUTH_TOKEN=" token; done = 1; next }
        { print }
        END { if (!done) print "MCP_AUTH_TOKEN=" token }
    ' "$ROOT/.env.example" >"$ENV_FILE"
    echo "ok  created $ENV_FILE with a new MCP_AUTH_TOKEN (only you can read it)"
fi
echo "next: scripts/start-server.sh, then scripts/smoke-test.sh"
