# Starts pyrun-mcp-server over HTTP in the background: pid in .run\server.pid, log in
# .run\server.log, base URL in .run\server.url. Settings come from .env (see .env.example).
#
#   scripts\start-server.ps1 [-Bind ADDR:PORT] [-Wait SECONDS] [-OAuth] [-- SERVER-FLAGS...]
#
# -OAuth: sign-in for Claude's connectors (MCP_OAUTH=1); give it a fixed public URL, e.g.
#   scripts\start-server.ps1 -OAuth -- --tunnel ngrok --tunnel-domain YOUR-NAME.ngrok-free.app
param(
    [string]$Bind = '',
    [int]$Wait = 30,
    [switch]$OAuth,
    [Parameter(ValueFromRemainingArguments = $true)][string[]]$ServerArgs = @()
)
$ErrorActionPreference = 'Stop'
. (Join-Path $PSScriptRoot 'common.ps1')

if (-not $Bind) { $Bind = Get-Setting 'MCP_BIND' '127.0.0.1:8000' }
if ($OAuth) { $env:MCP_OAUTH = '1' }
$pidFile = Join-Path $RunDir 'server.pid'
$logFile = Join-Path $RunDir 'server.log'
$urlFile = Join-Path $RunDir 'server.url'
$running = Read-PidFile $pidFile
if (Test-Alive $running) {
    Write-Output "pyrun-mcp-server is already running (pid $running): $(Get-Content $urlFile -ErrorAction SilentlyContinue)"
    Hint 'scripts\stop-server.ps1 stops it'
    exit 0
}
$bin = Get-ServerBin
New-Item -ItemType Directory -Force -Path $RunDir | Out-Null
Remove-Item $urlFile -ErrorAction SilentlyContinue

# From the repository root, so the server reads .env and finds .\python_projects like the docs say.
$process = Start-Background $bin (@('--transport', 'http', '--bind', $Bind) + $ServerArgs) $logFile
Set-Content -Path $pidFile -Value $process.Id

# The server prints `pyrun-mcp listening on http://ADDR` once it accepts connections.
$deadline = (Get-Date).AddSeconds($Wait)
$url = $null
while (-not $url) {
    $found = Select-String -Path $logFile -Pattern 'pyrun-mcp listening on (http\S+)' -ErrorAction SilentlyContinue | Select-Object -First 1
    if ($found) { $url = $found.Matches[0].Groups[1].Value; break }
    if ($process.HasExited) {
        Remove-Item $pidFile -ErrorAction SilentlyContinue
        Get-Content $logFile -Tail 20 | ForEach-Object { [Console]::Error.WriteLine($_) }
        Fail "pyrun-mcp-server exited during start-up (log: $logFile)"
    }
    if ((Get-Date) -gt $deadline) {
        Stop-Process -Id $process.Id -ErrorAction SilentlyContinue
        Remove-Item $pidFile -ErrorAction SilentlyContinue
        Get-Content $logFile -Tail 20 | ForEach-Object { [Console]::Error.WriteLine($_) }
        Fail "pyrun-mcp-server did not start listening within $Wait s (log: $logFile)"
    }
    Start-Sleep -Milliseconds 200
}
Set-Content -Path $urlFile -Value $url
Write-Output "pyrun-mcp-server running (pid $($process.Id), log $logFile)"
Write-Output "  Streamable HTTP: $url/mcp"
Write-Output "  legacy SSE:      $url/sse"
Select-String -Path $logFile -Pattern 'public URL' | ForEach-Object { Write-Output "  $($_.Line)" }
$public = Select-String -Path $logFile -Pattern 'public URL \(Streamable HTTP\): (https\S+)' | Select-Object -First 1
if ((Get-Setting 'MCP_OAUTH' '') -in @('1', 'true', 'yes', 'on') -and $public) {
    Write-Output 'Claude connector URL (Settings > Connectors > Add custom connector):'
    & $bin config claude-ai --url $public.Matches[0].Groups[1].Value 2>&1 | ForEach-Object { Write-Output "  $_" }
}
Write-Output 'next: scripts\smoke-test.ps1   (stop with scripts\stop-server.ps1)'
