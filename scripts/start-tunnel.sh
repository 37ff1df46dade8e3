#!/usr/bin/env bash
# Gives the local server a public https URL with the ngrok agent (`ngrok http PORT`), started in
# the background (pid in .run/ngrok.pid, log in .run/ngrok.log); reads the URL from the agent's
# local API and prints the client command and assistant configs for it.
# (Or skip the agent: with a server built with the tunnel feature, as scripts/setup.sh builds it,
# scripts/start-server.sh -- --tunnel ngrok opens the tunnel in-process.)
#
#   scripts/start-tunnel.sh [--port PORT] [--domain DOMAIN] [--api URL] [--wait SECONDS] [--oauth]
#
# Needs: the ngrok agent on PATH with an authtoken (ngrok config add-authtoken TOKEN), the server
# running on PORT with MCP_AUTH_TOKEN set (a public URL without a token is refused).
# --oauth (for Claude's connectors) also needs --domain (a fixed one) and a server started with
# scripts/start-server.sh --oauth -- --public-url https://DOMAIN; prints the connector steps.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

port=""
domain=""
api="http://127.0.0.1:4040"
wait_secs=20
oauth=""
while [[ $# -gt 0 ]]; do
    case $1 in
    --port) port=${2:?--port needs a number}; shift 2 ;;
    --domain) domain=${2:?--domain needs a domain}; shift 2 ;;
    --api) api=${2:?--api needs a URL}; shift 2 ;;
    --wait) wait_secs=${2:?--wait needs SECONDS}; shift 2 ;;
    --oauth) oauth=1; shift ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
    esac
done
if [[ -z "$port" ]]; then
    if [[ -f "$RUN_DIR/server.url" ]]; then
        port=$(sed 's/.*:\([0-9]*\)$/\1/' "$RUN_DIR/server.url")
    else
        port=$(env_value MCP_BIND 127.0.0.1:8000)
        port=${port##*:}
    fi
fi
[[ "$port" =~ ^[0-9]+$ ]] || die "bad port '$port'"
[[ -z "$oauth" || -n "$domain" ]] || die "--oauth needs --domain: Claude stays signed in only while the URL stays the same
hint: reserve ngrok's free static domain (https://dashboard.ngrok.com/domains), then: --oauth --domain NAME.ngrok-free.app"
command -v curl >/dev/null 2>&1 || die "curl not found on PATH"
if ! command -v ngrok >/dev/null 2>&1; then
    # Advise the server's built-in tunnel only when this server binary has it.
    if ( "$(server_bin 2>/dev/null)" --version 2>/dev/null || true ) | grep -q "tunnel: built in"; then
        builtin="hint: or use the server's built-in tunnel: scripts/start-server.sh -- --tunnel ngrok"
    else
        builtin="hint: or build the server with its built-in tunnel (scripts/setup.sh does: cargo build --release --workspace --features pyrun-mcp-server/tunnel), then: scripts/start-server.sh -- --tunnel ngrok"
    fi
    die "the ngrok agent is not on PATH
hint: install it from https://ngrok.com/download and run: ngrok config add-authtoken YOUR_TOKEN
$builtin"
fi

# Refuse to publish a server that does not ask for a token.
local_url="http://127.0.0.1:$port"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$local_url/health" || true)
[[ "$code" == 200 ]] || die "no pyrun-mcp-server answers on $local_url (health: $code)
hint: start it first: scripts/start-server.sh"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    --data '{"jsonrpc":"2.0","id":1,"method":"ping"}' "$local_url/mcp" || true)
[[ "$code" == 401 ]] || die "the server on $local_url does not require a token (POST /mcp gave $code): refusing to make it public
hint: set MCP_AUTH_TOKEN in .env (scripts/setup.sh makes one), then restart: scripts/stop-server.sh; scripts/start-server.sh"
# Claude's connectors sign in with OAuth: the server must offer it for the public URL.
if [[ -n "$oauth" ]]; then
    metadata=$(curl -s --max-time 5 "$local_url/.well-known/oauth-protected-resource/mcp" || true)
    [[ "$metadata" == *"\"https://$domain/mcp\""* ]] || die "the server on $local_url does not offer OAuth sign-in for https://$domain/mcp
hint: restart it with OAuth for that URL: scripts/stop-server.sh; scripts/start-server.sh --oauth -- --public-url https://$domain"
fi

pid_file="$RUN_DIR/ngrok.pid"
log_file="$RUN_DIR/ngrok.log"
if [[ -f "$pid_file" ]] && pid_alive "$(tr -dc '0-9' <"$pid_file")"; then
    die "an ngrok agent started by this script is running (pid $(cat "$pid_file"))
hint: scripts/stop-tunnel.sh stops it"
fi
mkdir -p "$RUN_DIR"
args=(http "127.0.0.1:$port" --log stdout)
[[ -z "$domain" ]] || args+=(--domain "$domain")
# ngrok keeps the public Host header by default; the server accepts loopback names only unless
# told otherwise, so the agent presents the local address (the bearer token still guards it).
args+=(--host-header "localhost:$port")
nohup ngrok "${args[@]}" </dev/null >"$log_file" 2>&1 &
pid=$!
echo "$pid" >"$pid_file"

# The agent's local API lists its tunnels once they are up.
public=""
deadline=$((SECONDS + wait_secs))
while [[ -z "$public" ]]; do
    pid_alive "$pid" || start_failed "$pid_file" "$log_file" "the ngrok agent exited (log: $log_file)
hint: is its authtoken set? ngrok config add-authtoken YOUR_TOKEN"
    ((SECONDS < deadline)) || start_failed "$pid_file" "$log_file" \
        "no public URL from the ngrok agent within $wait_secs s ($api/api/tunnels)" "$pid"
    sleep 0.5
    tunnels=$(curl -s --max-time 2 "$api/api/tunnels" || true)
    # Of the agent's tunnels, the https one that forwards to our port.
    public=$(tr -d '\n' <<<"$tunnels" |
        grep -o '"public_url":[[:space:]]*"https://[^"]*"[^}]*"addr":[[:space:]]*"[^"]*:'"$port"'"' |
        head -n 1 | sed 's/"public_url":[[:space:]]*"\([^"]*\)".*/\1/' || true)
done
public=${public%/}
echo "$public/mcp" >"$RUN_DIR/tunnel.url"
echo "ngrok agent running (pid $pid, log $log_file)"
echo "  Streamable HTTP: $public/mcp"
echo "  legacy SSE:      $public/sse"
echo
echo "check it:  scripts/smoke-test.sh --url $public/mcp"
echo "client:    pyrun-mcp-client --server $public/mcp --header 'ngrok-skip-browser-warning: 1' tools"
echo "           (with MCP_AUTH_TOKEN set, or --token TOKEN)"
bin=${PYRUN_SERVER_BIN:-$ROOT/target/release/pyrun-mcp-server$EXE}
if [[ -x "$bin" ]]; then
    if [[ -n "$oauth" ]]; then
        echo
        echo "# claude-ai (claude.ai, Claude Desktop and mobile connectors)"
        (cd "$ROOT" && "$bin" config claude-ai --url "$public/mcp" 2>&1) || true
    fi
    for assistant in claude-code cursor cline claude-desktop; do
        echo
        echo "# $assistant"
        (cd "$ROOT" && "$bin" config "$assistant" --url "$public/mcp" 2>/dev/null) || true
    done
fi
echo
echo "stop it with scripts/stop-tunnel.sh"
