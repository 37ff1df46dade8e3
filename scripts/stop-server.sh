#!/usr/bin/env bash
# Stops the pyrun-mcp-server that scripts/start-server.sh started (only the pid it recorded).
#
#   scripts/stop-server.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

case ${1-} in
-h | --help) sed -n '2,4p' "$0"; exit 0 ;;
"") ;;
*) die "unknown option '$1' (see --help)" ;;
esac
stop_pid_file "$RUN_DIR/server.pid" pyrun-mcp-server
rm -f "$RUN_DIR/server.url"
