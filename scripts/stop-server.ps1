# Stops the pyrun-mcp-server that scripts\start-server.ps1 started (only the pid it recorded).
#
#   scripts\stop-server.ps1
$ErrorActionPreference = 'Stop'
. (Join-Path $PSScriptRoot 'common.ps1')

Stop-PidFile (Join-Path $RunDir 'server.pid') 'pyrun-mcp-server'
Remove-Item (Join-Path $RunDir 'server.url') -ErrorAction SilentlyContinue
