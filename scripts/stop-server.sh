#!/usr/bin/env bash
# Stops the pyrun-mcp-server that scripts/start-server.sh started (only the pid it recorded).
#
#   scripts/stop-server.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

stop_script "$RUN_DIR/server.pid" pyrun-mcp-server "$RUN_DIR/server.url" "$@"
