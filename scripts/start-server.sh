#!/usr/bin/env bash
# Starts pyrun-mcp-server over HTTP in the background: pid in .run/server.pid, log in
# .run/server.log, base URL in .run/server.url. Settings come from .env (see .env.example).
#
#   scripts/start-server.sh [--bind ADDR:PORT] [--wait SECONDS] [--oauth] [-- SERVER-FLAGS...]
#
# --oauth: sign-in for Claude's connectors (MCP_OAUTH=1); give it a fixed public URL, e.g.
#   scripts/start-server.sh --oauth -- --tunnel ngrok --tunnel-domain YOUR-NAME.ngrok-free.app
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

bind=""
wait_secs=30
while [[ $# -gt 0 ]]; do
    case $1 in
    --bind) bind=${2:?--bind needs ADDR:PORT}; shift 2 ;;
    --wait) wait_secs=${2:?--wait needs SECONDS}; shift 2 ;;
    --oauth) export MCP_OAUTH=1; shift ;;
    --) shift; break ;;
    -h | --help) sed -n '2,8p' "$0"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
    esac
done
bind=${bind:-$(env_value MCP_BIND 127.0.0.1:8000)}

pid_file="$RUN_DIR/server.pid"
log_file="$RUN_DIR/server.log"
url_file="$RUN_DIR/server.url"
if [[ -f "$pid_file" ]] && pid_alive "$(tr -dc '0-9' <"$pid_file")"; then
    echo "pyrun-mcp-server is already running (pid $(cat "$pid_file")): $(cat "$url_file" 2>/dev/null)"
    hint "scripts/stop-server.sh stops it"
    exit 0
fi
bin=$(server_bin)
mkdir -p "$RUN_DIR"
rm -f "$url_file"
: >"$log_file"

# From the repository root, so the server reads .env and finds ./python_projects like the docs say.
cd "$ROOT"
nohup "$bin" --transport http --bind "$bind" "$@" </dev/null >>"$log_file" 2>&1 &
pid=$!
echo "$pid" >"$pid_file"

# The server prints `pyrun-mcp listening on http://ADDR` once it accepts connections.
deadline=$((SECONDS + wait_secs))
url=""
while [[ -z "$url" ]]; do
    url=$(sed -n 's/.*pyrun-mcp listening on \(http[^ ]*\).*/\1/p' "$log_file" | head -n 1)
    [[ -n "$url" ]] && break
    pid_alive "$pid" ||
        start_failed "$pid_file" "$log_file" "pyrun-mcp-server exited during start-up (log: $log_file)"
    ((SECONDS < deadline)) || start_failed "$pid_file" "$log_file" \
        "pyrun-mcp-server did not start listening within $wait_secs s (log: $log_file)" "$pid"
    sleep 0.2
done
echo "$url" >"$url_file"
echo "pyrun-mcp-server running (pid $pid, log $log_file)"
echo "  Streamable HTTP: $url/mcp"
echo "  legacy SSE:      $url/sse"
grep 'public URL' "$log_file" | sed 's/^/  /' || true
public=$(sed -n 's/.*public URL (Streamable HTTP): \(https[^ ]*\).*/\1/p' "$log_file" | head -n 1)
case $(env_value MCP_OAUTH "") in
1 | true | TRUE | True | yes | on) oauth=1 ;;
*) oauth="" ;;
esac
if [[ -n "$oauth" && -n "$public" ]]; then
    echo "Claude connector URL (Settings > Connectors > Add custom connector):"
    "$bin" config claude-ai --url "$public" 2>&1 | sed 's/^/  /' || true
fi
echo "next: scripts/smoke-test.sh   (stop with scripts/stop-server.sh)"
