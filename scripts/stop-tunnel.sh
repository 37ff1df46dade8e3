#!/usr/bin/env bash
# Stops the ngrok agent that scripts/start-tunnel.sh started (only the pid it recorded).
#
#   scripts/stop-tunnel.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

stop_script "$RUN_DIR/ngrok.pid" ngrok "$RUN_DIR/tunnel.url" "$@"
