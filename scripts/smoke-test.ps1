# Checks a running server end to end with pyrun-mcp-client: lists the tools and the Python files,
# runs FILE (default: hello_world.py when listed, expecting "Hello, World!", else the first file
# listed) and expects it to succeed. The token comes from -Token, MCP_AUTH_TOKEN or .env.
#
#   scripts\smoke-test.ps1 [-Url URL] [-Token TOKEN] [-Header 'Name: value', ...] [-File FILE]
#
# Url defaults to the server scripts\start-server.ps1 started, else http://127.0.0.1:8000/mcp.
param([string]$Url = '', [string]$Token = '', [string[]]$Header = @(), [string]$File = '')
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
if (-not $File) {
    $files = @(& $client --server $Url @headerArgs files)
    if ($LASTEXITCODE -ne 0) { Fail 'listing the Python files failed (see the message above)' }
    if ($files -contains 'hello_world.py') { $File = 'hello_world.py' } else { $File = $files | Select-Object -First 1 }
    if (-not $File) { Fail 'the server lists no Python file to run; add one to its projects folder' }
}
$out = & $client --server $Url @headerArgs run $File
if ($LASTEXITCODE -ne 0) { Fail "running $File failed: $out" }
if ($File -eq 'hello_world.py' -and -not (($out -join "`n") -match 'Hello, World!')) { Fail "hello_world.py printed '$out', not 'Hello, World!'" }
Write-Output "  ok  run $File"
Write-Output 'smoke test passed'
