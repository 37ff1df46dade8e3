# Builds the MCP Bundle (.mcpb) that Claude Desktop installs with a double click, for this platform:
# the release server, and a manifest whose tool list comes from the server's own tools/list. Packed
# and checked with the official mcpb CLI (pinned, installed from npm into target\mcpb-cli).
#
#   scripts\bundle.ps1 [-Out DIR]        (default DIR: dist\; PYRUN_SERVER_BIN: another build)
param([string]$Out = '')
$ErrorActionPreference = 'Stop'
. (Join-Path $PSScriptRoot 'common.ps1')

$McpbVersion = '2.1.2'
if (-not $Out) { $Out = Join-Path $Root 'dist' }
if (-not (Get-Command npm -ErrorAction SilentlyContinue)) { Fail "npm is needed for the official mcpb CLI`nhint: install Node.js (https://nodejs.org)" }
$python = if (Get-Command python3 -ErrorAction SilentlyContinue) { 'python3' } elseif (Get-Command py -ErrorAction SilentlyContinue) { 'py' } else { 'python' }

if (-not $env:PYRUN_SERVER_BIN) {
    Push-Location $Root
    try { & cargo build --release -p pyrun-mcp-server -p pyrun-mcp-client } finally { Pop-Location }
    if ($LASTEXITCODE -ne 0) { Fail 'cargo build failed' }
}
$bin = Get-ServerBin
$client = Get-ClientBin

$cliDir = Join-Path $Root 'target\mcpb-cli'
$mcpb = Join-Path $cliDir 'node_modules\.bin\mcpb'
if ($OnWindows) { $mcpb += '.cmd' }
if (-not (Test-Path $mcpb)) {
    & npm install --prefix $cliDir --no-audit --no-fund --silent "@anthropic-ai/mcpb@$McpbVersion"
    if ($LASTEXITCODE -ne 0) { Fail 'npm install @anthropic-ai/mcpb failed' }
}

$os = if ($OnWindows) { 'win32' } elseif ($IsMacOS) { 'darwin' } else { 'linux' }
$arch = if ($env:PROCESSOR_ARCHITECTURE -eq 'ARM64') { 'aarch64' } else { 'x86_64' }
if (-not $OnWindows) { $arch = (& uname -m); if ($arch -eq 'arm64') { $arch = 'aarch64' } }
$version = ((& $bin --version) -split ' ')[1]

$stage = Join-Path ([System.IO.Path]::GetTempPath()) ("pyrun-bundle-" + [guid]::NewGuid())
try {
    $serverDir = Join-Path $stage 'server'
    $projects = Join-Path $stage 'projects'
    New-Item -ItemType Directory -Path $serverDir, $projects | Out-Null
    Copy-Item $bin (Join-Path $serverDir "pyrun-mcp-server$Exe")
    Copy-Item (Join-Path $PSScriptRoot 'bundle-icon.png') (Join-Path $stage 'icon.png')
    # The tools as this very build lists them (an empty projects folder is enough to ask).
    $tools = Join-Path $stage 'tools.json'
    $serverCommand = "$(Format-Argument $bin) --transport stdio --projects-dir $(Format-Argument $projects)"
    & $client --json --server $serverCommand tools | Set-Content -Path $tools -Encoding utf8
    if ($LASTEXITCODE -ne 0) { Fail 'listing the tools of the server failed' }
    Remove-Item $projects
    $manifest = Join-Path $stage 'manifest.json'
    & $python (Join-Path $PSScriptRoot 'bundle-manifest.py') $version $os $tools $manifest
    if ($LASTEXITCODE -ne 0) { Fail 'writing the manifest failed' }
    Remove-Item $tools

    & $mcpb validate $manifest
    if ($LASTEXITCODE -ne 0) { Fail 'the manifest does not validate' }
    New-Item -ItemType Directory -Force -Path $Out | Out-Null
    $bundle = Join-Path $Out "pyrun-mcp-$version-$os-$arch.mcpb"
    & $mcpb pack $stage $bundle
    if ($LASTEXITCODE -ne 0) { Fail 'mcpb pack failed' }
    & $mcpb info $bundle
    Write-Output $bundle
} finally {
    Remove-Item -Recurse -Force $stage -ErrorAction SilentlyContinue
}
