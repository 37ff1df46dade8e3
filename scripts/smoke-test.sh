#!/usr/bin/env bash
# Checks a running server end to end with pyrun-mcp-client: lists the tools, runs hello_world.py
# and expects "Hello, World!". The token comes from --token, MCP_AUTH_TOKEN or .env.
#
#   scripts/smoke-test.sh [--url URL] [--token TOKEN] [--header 'Name: value']...
#
# URL defaults to the server scripts/start-server.sh started, else http://127.0.0.1:8000/mcp.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

url=""
token=""
headers=(--header "ngrok-skip-browser-warning: 1")
while [[ $# -gt 0 ]]; do
    case $1 in
    --url) url=${2:?--url needs a URL}; shift 2 ;;
    --token) token=${2:?--token needs a value}; shift 2 ;;
    --header) headers+=(--header "${2:?--header needs 'Name: value'}"); shift 2 ;;
    -h | --help) sed -n '2,7p' "$0"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
    esac
done
if [[ -z "$url" ]]; then
    if [[ -f "$RUN_DIR/server.url" ]]; then
        url="$(cat "$RUN_DIR/server.url")/mcp"
    else
        url="http://127.0.0.1:8000/mcp"
    fi
fi
token=${token:-$(env_value MCP_AUTH_TOKEN)}
client=$(client_bin)
# The token travels in the environment, not on a command line others can read.
export MCP_AUTH_TOKEN="$token"
[[ -n "$token" ]] || unset MCP_AUTH_TOKEN

echo "smoke test of $url"
if ! tools=$("$client" --server "$url" "${headers[@]}" tools); then
    die "listing the tools failed (see the message above)"
fi
for tool in run_python list_python_files; do
    grep -q "$tool" <<<"$tools" || die "tool $tool missing from: $tools"
done
echo "  ok  tools: run_python, list_python_files"
if ! out=$("$client" --server "$url" "${headers[@]}" run hello_world.py); then
    die "running hello_world.py failed: $out"
fi
grep -q "Hello, World!" <<<"$out" || die "hello_world.py printed '$out', not 'Hello, World!'"
echo "  ok  run hello_world.py: Hello, World!"
echo "smoke test passed"
