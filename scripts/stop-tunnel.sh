#!/usr/bin/env bash
# Stops the ngrok agent that scripts/start-tunnel.sh started (only the pid it recorded).
#
#   scripts/stop-tunnel.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

case ${1-} in
-h | --help) sed -n '2,4p' "$0"; exit 0 ;;
"") ;;
*) die "unknown option '$1' (see --help)" ;;
esac
stop_pid_file "$RUN_DIR/ngrok.pid" ngrok
rm -f "$RUN_DIR/tunnel.url"
