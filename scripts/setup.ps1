# One-time setup: checks Rust and Python, builds the release binaries (with the ngrok tunnel), and
# creates .env from .env.example with a freshly generated MCP_AUTH_TOKEN. An existing .env is
# never overwritten.
#
#   scripts\setup.ps1 [-SkipBuild]
param([switch]$SkipBuild)
$ErrorActionPreference = 'Stop'
. (Join-Path $PSScriptRoot 'common.ps1')

$python = $null
foreach ($candidate in @('python', 'python3', 'py')) {
    if (Get-Command $candidate -ErrorAction SilentlyContinue) {
        & $candidate -c 'import sys; sys.exit(sys.version_info < (3, 8))' 2>$null
        if ($LASTEXITCODE -eq 0) { $python = $candidate; break }
    }
}
if (-not $python) { Fail "Python 3.8 or newer not found on PATH`nhint: install it from https://www.python.org/downloads/ (tick 'Add python.exe to PATH')" }
Write-Output "ok  $(& $python --version 2>&1)"

if (-not $SkipBuild) {
    if (-not (Get-Command cargo -ErrorAction SilentlyContinue)) { Fail "cargo not found on PATH`nhint: install Rust from https://rustup.rs, then open a new terminal" }
    Write-Output "ok  $(cargo --version)"
    Write-Output 'building the release binaries (a few minutes the first time)...'
    Push-Location $Root
    try { cargo build --release --workspace --features pyrun-mcp-server/tunnel } finally { Pop-Location }
    if ($LASTEXITCODE -ne 0) { Fail 'cargo build failed (see above)' }
    Write-Output "ok  $(Join-Path $Root "target\release\pyrun-mcp-server$Exe")"
}

if (Test-Path $EnvFile) {
    Write-Output "ok  kept the existing $EnvFile"
    if (-not (Get-Setting 'MCP_AUTH_TOKEN')) { Hint 'it sets no MCP_AUTH_TOKEN: a public URL (tunnel) needs one' }
} else {
    $example = Join-Path $Root '.env.example'
    if (-not (Test-Path $example)) { Fail "no .env.example in $Root" }
    $bytes = New-Object byte[] 32
    [System.Security.Cryptography.RandomNumberGenerator]::Create().GetBytes($bytes)
    $token = -join ($bytes | ForEach-Object { $_.ToString('x2') })
    # The MCP_AUTH_TOKEN line of the example (commented out or not) gets the new token.
    $done = $false
    $lines = foreach ($line in Get-Content $example) {
        if (-not $done -and $line -match '^[#\s]*MCP_AUTH_TOKEN\s*=') { $done = $true; "MCP_AUTH_TOKEN=$token" } else { $line }
    }
    if (-not $done) { $lines = @($lines) + "MCP_AUTH_TOKEN=$token" }
    # UTF-8 without a byte-order mark, which .env readers would take for part of the first key.
    [System.IO.File]::WriteAllLines($EnvFile, [string[]]$lines)
    Write-Output "ok  created $EnvFile with a new MCP_AUTH_TOKEN"
}
Write-Output 'next: scripts\start-server.ps1, then scripts\smoke-test.ps1'
