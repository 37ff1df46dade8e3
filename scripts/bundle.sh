#!/usr/bin/env bash
# Builds the MCP Bundle (.mcpb) that Claude Desktop installs with a double click, for this platform:
# the release server, and a manifest whose tool list comes from the server's own tools/list. Packed
# and checked with the official mcpb CLI (pinned, installed from npm into target/mcpb-cli).
#
#   scripts/bundle.sh [--out DIR]        (default DIR: dist/; PYRUN_SERVER_BIN: another build)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

MCPB_VERSION=2.1.2
out_dir="$ROOT/dist"
while [[ $# -gt 0 ]]; do
    case $1 in
    --out) out_dir=${2:?--out needs a folder}; shift 2 ;;
    -h | --help) sed -n '2,6p' "$0"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
    esac
done
command -v npm >/dev/null || die "npm is needed for the official mcpb CLI
hint: install Node.js (https://nodejs.org)"
command -v python3 >/dev/null || die "python3 is needed to write the manifest"

if [[ -z ${PYRUN_SERVER_BIN-} ]]; then
    (cd "$ROOT" && cargo build --release -p pyrun-mcp-server -p pyrun-mcp-client)
fi
bin=$(server_bin)
client=$(client_bin)

mcpb="$ROOT/target/mcpb-cli/node_modules/.bin/mcpb"
if [[ ! -x "$mcpb" ]]; then
    npm install --prefix "$ROOT/target/mcpb-cli" --no-audit --no-fund --silent \
        "@anthropic-ai/mcpb@$MCPB_VERSION" >&2
fi

case $(uname -s) in
Linux) os=linux ;;
Darwin) os=darwin ;;
*) die "this script bundles for Linux and macOS; on Windows use scripts/bundle.ps1" ;;
esac
arch=$(uname -m)
[[ $arch != arm64 ]] || arch=aarch64
version=$("$bin" --version | awk '{print $2}')

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/server" "$stage/projects"
cp "$bin" "$stage/server/pyrun-mcp-server"
cp "$ROOT/scripts/bundle-icon.png" "$stage/icon.png"
# The tools as this very build lists them (an empty projects folder is enough to ask).
"$client" --json --server "$(printf '%q --transport stdio --projects-dir %q' "$bin" "$stage/projects")" \
    tools >"$stage/tools.json"
rmdir "$stage/projects"
python3 "$ROOT/scripts/bundle-manifest.py" "$version" "$os" "$stage/tools.json" "$stage/manifest.json"
rm "$stage/tools.json"

"$mcpb" validate "$stage/manifest.json"
mkdir -p "$out_dir"
bundle="$out_dir/pyrun-mcp-$version-$os-$arch.mcpb"
"$mcpb" pack "$stage" "$bundle"
"$mcpb" info "$bundle"
echo "$bundle"
