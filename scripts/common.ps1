# Shared by the scripts in this folder (dot-sourced, not run): paths, .env lookup, binaries,
# messages. Works in Windows PowerShell 5.1 and PowerShell 7.

$Root = Split-Path -Parent $PSScriptRoot
$EnvFile = Join-Path $Root '.env'
$RunDir = Join-Path $Root '.run'
$OnWindows = ($env:OS -eq 'Windows_NT')
$Exe = if ($OnWindows) { '.exe' } else { '' }

function Fail([string]$Message) {
    [Console]::Error.WriteLine("error: $Message")
    exit 1
}

function Hint([string]$Message) {
    [Console]::Error.WriteLine("hint: $Message")
}

# The environment wins, then .env in the repository root, then $Default.
function Get-Setting([string]$Name, [string]$Default = '') {
    $value = [Environment]::GetEnvironmentVariable($Name)
    if ($value) { return $value }
    if (Test-Path $EnvFile) {
        $line = Get-Content $EnvFile | Where-Object { $_ -match "^\s*$Name\s*=" } | Select-Object -Last 1
        if ($line) { return ($line -replace "^\s*$Name\s*=", '').Trim().Trim('"') }
    }
    return $Default
}

# The release binaries that scripts\setup.ps1 builds (PYRUN_SERVER_BIN / PYRUN_CLIENT_BIN override).
function Get-ServerBin {
    $bin = $env:PYRUN_SERVER_BIN
    if (-not $bin) { $bin = Join-Path $Root "target\release\pyrun-mcp-server$Exe" }
    if (-not (Test-Path $bin)) { Fail "no server binary at $bin`nhint: build it with scripts\setup.ps1 (or set PYRUN_SERVER_BIN)" }
    return $bin
}

function Get-ClientBin {
    $bin = $env:PYRUN_CLIENT_BIN
    if (-not $bin) { $bin = Join-Path $Root "target\release\pyrun-mcp-client$Exe" }
    if (-not (Test-Path $bin)) { Fail "no client binary at $bin`nhint: build it with scripts\setup.ps1 (or set PYRUN_CLIENT_BIN)" }
    return $bin
}

function Read-PidFile([string]$File) {
    if (-not (Test-Path $File)) { return $null }
    $text = (Get-Content $File -Raw) -replace '[^0-9]', ''
    if (-not $text) { return $null }
    return [int]$text
}

function Test-Alive($Id) {
    if ($null -eq $Id) { return $false }
    return [bool](Get-Process -Id $Id -ErrorAction SilentlyContinue)
}

# Stops the process recorded in $File (only that pid, and only if its name is $Name); removes $File.
function Stop-PidFile([string]$File, [string]$Name) {
    $id = Read-PidFile $File
    if (-not (Test-Alive $id)) {
        Remove-Item $File -ErrorAction SilentlyContinue
        Write-Output "$Name is not running"
        return
    }
    $process = Get-Process -Id $id
    if ($process.ProcessName -notlike "$Name*") {
        Remove-Item $File -ErrorAction SilentlyContinue
        Fail "pid $id from $File is '$($process.ProcessName)', not ${Name}: left it alone and removed the stale pid file"
    }
    Stop-Process -Id $id
    $null = $process.WaitForExit(10000)
    Remove-Item $File -ErrorAction SilentlyContinue
    Write-Output "$Name stopped (pid $id)"
}

# One argument for Start-Process -ArgumentList, quoted when it holds a space.
function Format-Argument([string]$Value) {
    if ($Value -match '[\s"]') { return '"' + ($Value -replace '"', '\"') + '"' }
    return $Value
}

# Starts $FilePath in the background with its output in $Log (stdout in $Log.out); returns the process.
function Start-Background([string]$FilePath, [string[]]$Arguments, [string]$Log) {
    $options = @{
        FilePath               = $FilePath
        ArgumentList           = @($Arguments | ForEach-Object { Format-Argument $_ })
        WorkingDirectory       = $Root
        RedirectStandardError  = $Log
        RedirectStandardOutput = "$Log.out"
        PassThru               = $true
    }
    if ($OnWindows) { $options.WindowStyle = 'Hidden' } else { $options.NoNewWindow = $true }
    return Start-Process @options
}

# The HTTP status of a request, without throwing on 4xx/5xx (0 when nothing answers).
function Get-HttpStatus([string]$Uri, [string]$Method = 'GET', [string]$Body = $null) {
    $request = @{ Uri = $Uri; Method = $Method; TimeoutSec = 5; UseBasicParsing = $true }
    if ($Body) {
        $request.Body = $Body
        $request.ContentType = 'application/json'
        $request.Headers = @{ Accept = 'application/json, text/event-stream' }
    }
    try {
        return [int](Invoke-WebRequest @request).StatusCode
    } catch {
        if ($_.Exception.Response) { return [int]$_.Exception.Response.StatusCode }
        return 0
    }
}
