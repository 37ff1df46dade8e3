# Stops the ngrok agent that scripts\start-tunnel.ps1 started (only the pid it recorded).
#
#   scripts\stop-tunnel.ps1
$ErrorActionPreference = 'Stop'
. (Join-Path $PSScriptRoot 'common.ps1')

Stop-PidFile (Join-Path $RunDir 'ngrok.pid') 'ngrok'
Remove-Item (Join-Path $RunDir 'tunnel.url') -ErrorAction SilentlyContinue
