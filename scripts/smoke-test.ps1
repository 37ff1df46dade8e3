# Checks a running server end to end with pyrun-mcp-client: lists the tools, runs hello_world.py
# and expects "Hello, World!". The token comes from -Token, MCP_AUTH_TOKEN or .env.
#
#   scripts\smoke-test.ps1 [-Url URL] [-Token TOKEN] [-Header 'Name: value', ...]
#
# Url defaults to the server scripts\start-server.ps1 started, else http://127.0.0.1:8000/mcp.
param([string]$Url = '', [string]$Token = '', [string[]]$Header = @())
$ErrorActionPreference = 'Stop'
. (Join-Path $PSScriptRoot 'common.ps1')

if (-not $Url) {
    $urlFile = Join-Path $RunDir 'server.url'
    if (Test-Path $urlFile) { $Url = "$((Get-Content $urlFile -Raw).Trim())/mcp" } else { $Url = 'http://127.0.0.1:8000/mcp' }
}
if (-not $Token) { $Token = Get-Setting 'MCP_AUTH_TOKEN' }
$client = Get-ClientBin
# The token travels in the environment, not on a command line others can read.
$env:MCP_AUTH_TOKEN = $Token
$headerArgs = @('--header', 'ngrok-skip-browser-warning: 1')
foreach ($h in $Header) { $headerArgs += @('--header', $h) }

Write-Output "smoke test of $Url"
$tools = & $client --server $Url @headerArgs tools
if ($LASTEXITCODE -ne 0) { Fail 'listing the tools failed (see the message above)' }
foreach ($tool in @('run_python', 'list_python_files')) {
    if (-not (($tools -join "`n") -match $tool)) { Fail "tool $tool missing from: $tools" }
}
Write-Output '  ok  tools: run_python, list_python_files'
$out = & $client --server $Url @headerArgs run hello_world.py
if ($LASTEXITCODE -ne 0) { Fail "running hello_world.py failed: $out" }
if (-not (($out -join "`n") -match 'Hello, World!')) { Fail "hello_world.py printed '$out', not 'Hello, World!'" }
Write-Output '  ok  run hello_world.py: Hello, World!'
Write-Output 'smoke test passed'
