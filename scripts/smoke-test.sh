#!/usr/bin/env bash
# Checks a running server end to end with pyrun-mcp-client: lists the tools and the Python files,
# runs FILE (default: hello_world.py when listed, expecting "Hello, World!", else the first file
# listed) and expects it to succeed. The token comes from --token, MCP_AUTH_TOKEN or .env.
#
#   scripts/smoke-test.sh [--url URL] [--token TOKEN] [--header 'Name: value']... [--file FILE]
#
# URL defaults to the server scripts/start-server.sh started, else http://127.0.0.1:8000/mcp.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

url=""
token=""
file=""
headers=(--header "ngrok-skip-browser-warning: 1")
while [[ $# -gt 0 ]]; do
    case $1 in
    --url) url=${2:?--url needs a URL}; shift 2 ;;
    --token) token=${2:?--token needs a value}; shift 2 ;;
    --header) headers+=(--header "${2:?--header needs 'Name: value'}"); shift 2 ;;
    --file) file=${2:?--file needs a file of the projects folder}; shift 2 ;;
    -h | --help) sed -n '2,8p' "$0"; exit 0 ;;
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
if [[ -z "$file" ]]; then
    if ! files=$("$client" --server "$url" "${headers[@]}" files); then
        die "listing the Python files failed (see the message above)"
    fi
    if grep -qx "hello_world.py" <<<"$files"; then
        file=hello_world.py
    else
        file=$(head -n 1 <<<"$files")
    fi
    [[ -n "$file" ]] || die "the server lists no Python file to run; add one to its projects folder"
fi
if ! out=$("$client" --server "$url" "${headers[@]}" run "$file"); then
    die "running $file failed: $out"
fi
if [[ "$file" == hello_world.py ]]; then
    grep -q "Hello, World!" <<<"$out" || die "hello_world.py printed '$out', not 'Hello, World!'"
fi
echo "  ok  run $file"
echo "smoke test passed"
