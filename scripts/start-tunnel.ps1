# Gives the local server a public https URL with the ngrok agent (`ngrok http PORT`), started in
# the background (pid in .run\ngrok.pid, log in .run\ngrok.log); reads the URL from the agent's
# local API and prints the client command and assistant configs for it.
# (Or skip the agent: scripts\start-server.ps1 -- --tunnel ngrok opens the tunnel in-process.)
#
#   scripts\start-tunnel.ps1 [-Port PORT] [-Domain DOMAIN] [-Api URL] [-Wait SECONDS] [-OAuth]
#
# Needs: the ngrok agent on PATH with an authtoken (ngrok config add-authtoken TOKEN), the server
# running on PORT with MCP_AUTH_TOKEN set (a public URL without a token is refused).
# -OAuth (for Claude's connectors) also needs -Domain (a fixed one) and a server started with
# scripts\start-server.ps1 -OAuth -- --public-url https://DOMAIN; prints the connector steps.
param([int]$Port = 0, [string]$Domain = '', [string]$Api = 'http://127.0.0.1:4040', [int]$Wait = 20, [switch]$OAuth)
$ErrorActionPreference = 'Stop'
. (Join-Path $PSScriptRoot 'common.ps1')

if ($Port -eq 0) {
    $urlFile = Join-Path $RunDir 'server.url'
    if (Test-Path $urlFile) { $address = (Get-Content $urlFile -Raw).Trim() } else { $address = Get-Setting 'MCP_BIND' '127.0.0.1:8000' }
    $Port = [int]($address -replace '.*:', '')
}
if ($OAuth -and -not $Domain) { Fail "-OAuth needs -Domain: Claude stays signed in only while the URL stays the same`nhint: reserve ngrok's free static domain (https://dashboard.ngrok.com/domains), then: -OAuth -Domain NAME.ngrok-free.app" }
$ngrok = Get-Command ngrok -ErrorAction SilentlyContinue
if (-not $ngrok) {
    # Advise the server's built-in tunnel only when this server binary has it.
    $builtin = "hint: or build the server with its built-in tunnel (scripts\setup.ps1 does: cargo build --release --workspace --features pyrun-mcp-server/tunnel), then: scripts\start-server.ps1 -- --tunnel ngrok"
    $serverBin = $env:PYRUN_SERVER_BIN
    if (-not $serverBin) { $serverBin = Join-Path $Root "target\release\pyrun-mcp-server$Exe" }
    if ((Test-Path $serverBin) -and ((& $serverBin --version 2>$null) -match 'tunnel: built in')) {
        $builtin = "hint: or use the server's built-in tunnel: scripts\start-server.ps1 -- --tunnel ngrok"
    }
    Fail "the ngrok agent is not on PATH`nhint: install it from https://ngrok.com/download and run: ngrok config add-authtoken YOUR_TOKEN`n$builtin"
}

# Refuse to publish a server that does not ask for a token.
$local = "http://127.0.0.1:$Port"
$code = Get-HttpStatus "$local/health"
if ($code -ne 200) { Fail "no pyrun-mcp-server answers on $local (health: $code)`nhint: start it first: scripts\start-server.ps1" }
$code = Get-HttpStatus "$local/mcp" 'POST' '{"jsonrpc":"2.0","id":1,"method":"ping"}'
if ($code -ne 401) { Fail "the server on $local does not require a token (POST /mcp gave $code): refusing to make it public`nhint: set MCP_AUTH_TOKEN in .env (scripts\setup.ps1 makes one), then restart: scripts\stop-server.ps1; scripts\start-server.ps1" }
# Claude's connectors sign in with OAuth: the server must offer it for the public URL.
if ($OAuth) {
    $resource = $null
    try { $resource = (Invoke-RestMethod -Uri "$local/.well-known/oauth-protected-resource/mcp" -TimeoutSec 5).resource } catch { }
    if ($resource -ne "https://$Domain/mcp") { Fail "the server on $local does not offer OAuth sign-in for https://$Domain/mcp`nhint: restart it with OAuth for that URL: scripts\stop-server.ps1; scripts\start-server.ps1 -OAuth -- --public-url https://$Domain" }
}

$pidFile = Join-Path $RunDir 'ngrok.pid'
$logFile = Join-Path $RunDir 'ngrok.log'
$running = Read-PidFile $pidFile
if (Test-Alive $running) { Fail "an ngrok agent started by this script is running (pid $running)`nhint: scripts\stop-tunnel.ps1 stops it" }
New-Item -ItemType Directory -Force -Path $RunDir | Out-Null
$arguments = @('http', "127.0.0.1:$Port", '--log', 'stdout')
if ($Domain) { $arguments += @('--domain', $Domain) }
# ngrok keeps the public Host header by default; the server accepts loopback names only unless
# told otherwise, so the agent presents the local address (the bearer token still guards it).
$arguments += @('--host-header', "localhost:$Port")
$process = Start-Background $ngrok.Source $arguments $logFile
Set-Content -Path $pidFile -Value $process.Id

# The agent's local API lists its tunnels once they are up.
$public = $null
$deadline = (Get-Date).AddSeconds($Wait)
while (-not $public) {
    if ($process.HasExited) {
        Remove-Item $pidFile -ErrorAction SilentlyContinue
        Get-Content "$logFile.out" -Tail 20 -ErrorAction SilentlyContinue | ForEach-Object { [Console]::Error.WriteLine($_) }
        Fail "the ngrok agent exited (log: $logFile.out)`nhint: is its authtoken set? ngrok config add-authtoken YOUR_TOKEN"
    }
    if ((Get-Date) -gt $deadline) {
        Stop-Process -Id $process.Id -ErrorAction SilentlyContinue
        Remove-Item $pidFile -ErrorAction SilentlyContinue
        Fail "no public URL from the ngrok agent within $Wait s ($Api/api/tunnels)"
    }
    Start-Sleep -Milliseconds 500
    try {
        $tunnels = (Invoke-RestMethod -Uri "$Api/api/tunnels" -TimeoutSec 2).tunnels
        # Of the agent's tunnels, the https one that forwards to our port.
        $match = $tunnels | Where-Object { $_.public_url -like 'https://*' -and $_.config.addr -like "*:$Port" } | Select-Object -First 1
        if ($match) { $public = $match.public_url.TrimEnd('/') }
    } catch { }
}
Set-Content -Path (Join-Path $RunDir 'tunnel.url') -Value "$public/mcp"
Write-Output "ngrok agent running (pid $($process.Id), log $logFile.out)"
Write-Output "  Streamable HTTP: $public/mcp"
Write-Output "  legacy SSE:      $public/sse"
Write-Output ''
Write-Output "check it:  scripts\smoke-test.ps1 -Url $public/mcp"
Write-Output "client:    pyrun-mcp-client --server $public/mcp --header 'ngrok-skip-browser-warning: 1' tools"
Write-Output '           (with $env:MCP_AUTH_TOKEN set, or --token TOKEN)'
$bin = $env:PYRUN_SERVER_BIN
if (-not $bin) { $bin = Join-Path $Root "target\release\pyrun-mcp-server$Exe" }
if (Test-Path $bin) {
    Push-Location $Root
    try {
        if ($OAuth) {
            Write-Output ''
            Write-Output '# claude-ai (claude.ai, Claude Desktop and mobile connectors)'
            & $bin config claude-ai --url "$public/mcp" 2>&1
        }
        foreach ($assistant in @('claude-code', 'cursor', 'cline', 'claude-desktop')) {
            Write-Output ''
            Write-Output "# $assistant"
            & $bin config $assistant --url "$public/mcp" 2>$null
        }
    } finally { Pop-Location }
}
Write-Output ''
Write-Output 'stop it with scripts\stop-tunnel.ps1'
