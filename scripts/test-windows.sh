#!/usr/bin/env bash
# The Windows server, run for real under Wine on a Linux machine, driven by the Linux client:
# transports, listing, runs and exit codes, path refusals in Windows forms, a timeout and a
# cancel killing the run's tree, and no process left once a session ends. What Wine cannot
# show (NTFS links, Job Object limits, real Python) is listed in docs/windows.md.
#
#   scripts/test-windows.sh [--keep]     (--keep: leave the temp folder and its Wine prefix)
#
# Installs what it lacks (Debian/Ubuntu: mingw-w64 and wine64 with apt; the Rust target with
# rustup), builds the Windows binaries (debug, at low priority), the stand-in python.exe and
# bcryptprimitives.dll from scripts/windows/, makes a fresh Wine prefix in a temp folder and
# ends with `wineserver -k` for that prefix only. Every step runs under `timeout`. Not part of
# scripts/test.sh (its first build is a cross build of the whole server: see docs/developing.md);
# the integration test server/tests/standin_python.rs checks the stand-in against the server's
# start-up questions on every `cargo test`.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

keep=0
case ${1-} in
--keep) keep=1 ;;
"") ;;
-h | --help) sed -n '2,13p' "$0"; exit 0 ;;
*) die "unknown option '$1' (see --help)" ;;
esac

TARGET=x86_64-pc-windows-gnu
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
STANDINS=$TARGET_DIR/wine-standins
started=$SECONDS

say() { printf '== %s\n' "$*"; }

# --- What it needs -------------------------------------------------------------------------
wine_bin() {
    if command -v wine64 >/dev/null; then
        command -v wine64
    elif [[ -x /usr/lib/wine/wine64 ]]; then
        echo /usr/lib/wine/wine64
    fi
}

if ! command -v x86_64-w64-mingw32-gcc >/dev/null || [[ -z $(wine_bin) ]]; then
    command -v apt-get >/dev/null || die "needs mingw-w64 and wine64
hint: install them with your package manager, then run this again"
    sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    say "installing mingw-w64 and wine64 (apt, ~2 GB)"
    timeout 900 "${sudo[@]}" apt-get install -y --no-install-recommends mingw-w64 wine64 ||
        { timeout 300 "${sudo[@]}" apt-get update && timeout 900 "${sudo[@]}" apt-get install -y --no-install-recommends mingw-w64 wine64; }
fi
WINE=$(wine_bin)
WINESERVER=$(dirname "$WINE")/wineserver
[[ -x $WINESERVER ]] || WINESERVER=$(command -v wineserver)
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx $TARGET; then
    say "adding the Rust target $TARGET"
    timeout 600 rustup target add $TARGET
fi

# --- Builds --------------------------------------------------------------------------------
say "building the Windows binaries (debug) and the Linux client"
timeout 2400 nice -n 10 cargo build --quiet --target $TARGET -p pyrun-mcp-server -p pyrun-mcp-client
timeout 1200 nice -n 10 cargo build --quiet -p pyrun-mcp-client
SERVER_EXE=$TARGET_DIR/$TARGET/debug/pyrun-mcp-server.exe
CLIENT=$TARGET_DIR/debug/pyrun-mcp-client
mkdir -p "$STANDINS"
timeout 120 x86_64-w64-mingw32-gcc -O2 -Wall -o "$STANDINS/python.exe" "$ROOT/scripts/windows/python.c"
timeout 120 x86_64-w64-mingw32-gcc -O2 -Wall -shared -o "$STANDINS/bcryptprimitives.dll" \
    "$ROOT/scripts/windows/bcryptprimitives.c" -lbcrypt
built=$SECONDS

# --- A fresh prefix ------------------------------------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pyrun-wine.XXXXXX")
export WINEPREFIX=$tmp/prefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
http_pid=""
finish() {
    if [[ -n $http_pid ]]; then kill "$http_pid" 2>/dev/null || true; fi
    # This prefix's wineserver only (WINEPREFIX names it): other Wine users are left alone.
    timeout 60 "$WINESERVER" -k 2>/dev/null || true
    if ((keep)); then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap finish EXIT
# Interrupted (Ctrl-C, a CI's cancel): the prefix is still stopped and removed, through EXIT.
trap 'exit 130' INT TERM
say "making a Wine prefix in $tmp"
timeout 180 "$WINE" wineboot --init >"$tmp/wineboot.log" 2>&1 || die "wineboot failed: see $tmp/wineboot.log"
timeout 60 "$WINESERVER" -w
cp "$STANDINS/bcryptprimitives.dll" "$WINEPREFIX/drive_c/windows/system32/"
mkdir -p "$WINEPREFIX/drive_c/pyrun-standin"
cp "$STANDINS/python.exe" "$WINEPREFIX/drive_c/pyrun-standin/"
PYTHON='C:/pyrun-standin/python.exe'

# The projects folder, as Windows sees it through Wine's Z: drive (the whole Linux tree).
projects=$tmp/projects
mkdir -p "$projects/app"
winpath() { printf 'Z:%s' "$1"; }
printf 'print("hello from windows")\n#standin exit 3\n' >"$projects/app/hello.py"
printf 'print("ESCAPED")\n' >"$tmp/outside.py"
# Its child writes a counter into the named file every 100 ms until killed (60 s at most).
for name in timeout cancel survivor; do
    printf '#standin child beat-%s.txt\n#standin sleep 120\n' "$name" >"$projects/tree_$name.py"
done
ln -s ../outside.py "$projects/file_link.py"
ln -s .. "$projects/folder_link"
server_args=(--projects-dir "$(winpath "$projects")" --python "$PYTHON" --state-dir "$(winpath "$tmp/state")")
stdio() { printf '%s ' "$WINE" "$SERVER_EXE" --transport stdio "${server_args[@]}" "$@"; }

# --- Checks --------------------------------------------------------------------------------
passed=0
failed=()
# check NAME COMMAND...: runs COMMAND (bounded), which prints why it failed.
check() {
    local name=$1
    shift
    if out=$("$@" 2>&1); then
        passed=$((passed + 1))
        printf 'ok    %s\n' "$name"
    else
        failed+=("$name")
        printf 'FAIL  %s\n%s\n' "$name" "$out" | sed '3,$s/^/      /'
    fi
}

client() { timeout 60 "$CLIENT" "$@"; }

# The Windows processes of this prefix (and only of it) whose command line holds $1.
prefix_processes() {
    local dir line
    for dir in /proc/[0-9]*; do
        line=$(tr '\0' ' ' <"$dir/cmdline" 2>/dev/null) || continue
        [[ $line == *"$1"* ]] || continue
        tr '\0' '\n' <"$dir/environ" 2>/dev/null | grep -qx "WINEPREFIX=$WINEPREFIX" || continue
        echo "${dir#/proc/}: $line"
    done
}

# expect_output PATTERN COMMAND...: COMMAND succeeds and prints PATTERN (a grep -E pattern).
expect_output() {
    local pattern=$1 said
    shift
    said=$("$@" 2>&1) || { echo "exit $?: $said"; return 1; }
    grep -qE "$pattern" <<<"$said" || { echo "no /$pattern/ in: $said"; return 1; }
}

run_exit_code() {
    local said code=0
    said=$(client --server "$1" run app/hello.py -- one "two words" 2>&1) || code=$?
    [[ $code -eq 3 ]] || { echo "exit $code (wanted the script's 3): $said"; return 1; }
    if ! grep -q '^ARGV two words' <<<"$said" || ! grep -q 'hello from windows' <<<"$said"; then
        echo "unexpected output: $said"
        return 1
    fi
}

# Twenty quick runs in a row: each starts inside its Job Object (a script that ended before the
# server assigned it once failed the run with "Access denied").
quick_runs() {
    local said
    for _ in $(seq 1 20); do
        said=$(client --server "$URL" run app/hello.py 2>&1) && { echo "exit 0, wanted 3"; return 1; }
        grep -q 'hello from windows' <<<"$said" || { echo "a run failed: $said"; return 1; }
    done
}

# Sessions that end within a second (tools, files, a refused run, a run) leave no process of the
# server's: its start-up interpreter check or bytecode fill, left behind, once hung for good
# holding the session's pipes (so the client waits for its end up to its time limit).
no_process_left() {
    local left
    for _ in 1 2 3 4 5; do
        timeout 20 "$CLIENT" --server "$(stdio)" files >/dev/null
        timeout 20 "$CLIENT" --server "$(stdio)" tools >/dev/null
        timeout 20 "$CLIENT" --server "$(stdio)" run ../outside.py >/dev/null 2>&1
        timeout 20 "$CLIENT" --server "$(stdio)" run app/hello.py >/dev/null 2>&1
    done
    sleep 2
    left=$(prefix_processes 'pyrun-standin'; prefix_processes 'pyrun-mcp-server.exe')
    [[ -z $left ]] || { echo "left behind: $left"; return 1; }
}

# refused FORM: the server refuses the path and nothing runs.
refused() {
    local said code=0
    said=$(client --server "$URL" run "$1" 2>&1) || code=$?
    [[ $code -eq 1 ]] || { echo "exit $code (wanted 1, a refusal): $said"; return 1; }
    ! grep -qE 'ESCAPED|^ARGV|^print' <<<"$said" || { echo "it ran: $said"; return 1; }
}

# beating FILE: the child's counter in FILE moves (it is alive).
beating() {
    local first
    first=$(cat "$projects/$1" 2>/dev/null) || return 1
    sleep 0.5
    [[ $(cat "$projects/$1" 2>/dev/null) != "$first" ]]
}

wait_beating() {
    local i
    for i in $(seq 1 100); do
        beating "$1" && return 0
        sleep 0.1
    done
    echo "the run's child never beat in $1"
    return 1
}

# stopped FILE: the counter stands still for a second (the child is dead).
stopped() {
    local first
    sleep 1
    first=$(cat "$projects/$1")
    sleep 1
    [[ $(cat "$projects/$1") == "$first" ]] || { echo "the child still beats in $1"; return 1; }
}

timeout_kills_tree() {
    local code=0
    client --server "$URL" run tree_timeout.py --script-timeout 3 >/dev/null 2>&1 || code=$?
    [[ $code -eq 124 ]] || { echo "exit $code, wanted 124"; return 1; }
    stopped beat-timeout.txt
}

cancel_kills_tree() {
    local id
    id=$(client --server "$URL" run --detach tree_cancel.py 2>/dev/null | head -n 1)
    [[ -n $id ]] || { echo "no run id"; return 1; }
    wait_beating beat-cancel.txt
    client --server "$URL" cancel "$id" >/dev/null
    stopped beat-cancel.txt
}

# The control: without the Job Object (--sandbox off) the child outlives the timeout, so the
# two checks above can see a survivor.
child_survives_without_job() {
    local code=0
    client --server "$(stdio --sandbox off)" run tree_survivor.py --script-timeout 3 >/dev/null 2>&1 || code=$?
    [[ $code -eq 124 ]] || { echo "exit $code, wanted 124"; return 1; }
    sleep 1
    beating beat-survivor.txt || { echo "the child died without a Job Object: the tree checks prove nothing"; return 1; }
}

say "checks (stdio)"
check "stdio: tools lists run_python" expect_output '^run_python' client --server "$(stdio)" tools
check "stdio: files lists app/hello.py" expect_output 'app/hello.py' client --server "$(stdio)" files
check "stdio: a run gets its arguments and its exit code comes back" run_exit_code "$(stdio)"
check "stdio: sessions that end within a second leave no process behind" no_process_left

say "checks (HTTP)"
"$WINE" "$SERVER_EXE" --transport http --bind 127.0.0.1:0 "${server_args[@]}" 2>"$tmp/http.log" &
http_pid=$!
URL=""
for _ in $(seq 1 300); do
    URL=$(grep -oE 'listening on http://[0-9.:]+' "$tmp/http.log" | head -n 1 | sed 's/listening on //') || true
    [[ -n $URL ]] && break
    sleep 0.1
done
[[ -n $URL ]] || die "the HTTP server did not start: $(cat "$tmp/http.log")"
URL=$URL/mcp
check "http: files lists app/hello.py" expect_output 'app/hello.py' client --server "$URL" files
check "http: a run gets its arguments and its exit code comes back" run_exit_code "$URL"
check "http: twenty quick runs in a row each start in their job" quick_runs
check 'refused: ..\outside.py' refused '..\outside.py'
check 'refused: C:\Windows\win.ini' refused 'C:\Windows\win.ini'
check 'refused: C:/Windows/win.ini' refused 'C:/Windows/win.ini'
unc_outside="\\\\?\\$(winpath "$tmp" | sed 's|/|\\|g')\\outside.py"
check 'refused: \\?\Z:\...\outside.py' refused "$unc_outside"
check 'refused: \\localhost\c$\Windows\win.ini' refused '\\localhost\c$\Windows\win.ini'
# shellcheck disable=SC2016 # a literal $DATA: the NTFS stream name
check 'refused: app\hello.py::$DATA' refused 'app\hello.py::$DATA'
check 'refused: a file link out of the folder' refused 'file_link.py'
check 'refused: a folder link out of the folder' refused 'folder_link/outside.py'
check "http: a timeout kills the run and its child" timeout_kills_tree
check "http: cancel_run kills the run and its child" cancel_kills_tree
check "control: with --sandbox off the child outlives the timeout" child_survives_without_job

say "shutdown"
stops_on_ctrl_c() {
    local left
    kill -INT "$http_pid"
    for _ in $(seq 1 100); do
        kill -0 "$http_pid" 2>/dev/null || break
        sleep 0.1
    done
    ! kill -0 "$http_pid" 2>/dev/null || { echo "still running 10 s after Ctrl-C"; return 1; }
    left=$(prefix_processes 'pyrun-standin\python.exe tree_'; prefix_processes 'pyrun-mcp-server.exe')
    [[ -z $left ]] || { echo "left behind: $left"; return 1; }
}
check "http: Ctrl-C stops the server and leaves no run behind" stops_on_ctrl_c

# The stand-in notes each question it had no answer for (scripts/windows/python.c): a question
# the server asks at start and then shrugs off would pass every check above unseen.
nothing_unanswered() {
    local note=$WINEPREFIX/drive_c/pyrun-standin/unanswered.txt
    [[ ! -e $note ]] || { echo "the server asked the stand-in what it cannot answer: $(cat "$note")"; return 1; }
}
check "stand-in: the server asked nothing it cannot answer" nothing_unanswered

total=$((passed + ${#failed[@]}))
echo "$passed of $total checks passed (build $((built - started)) s, checks $((SECONDS - built)) s)"
((${#failed[@]} == 0)) || die "failed: ${failed[*]}"
