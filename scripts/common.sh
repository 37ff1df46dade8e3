# shellcheck shell=bash
# Shared by the scripts in this folder (sourced, not run): paths, .env lookup, binaries, messages.
# shellcheck disable=SC2034 # ENV_FILE, RUN_DIR and EXE are used by the scripts that source this.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ENV_FILE="$ROOT/.env"
RUN_DIR="$ROOT/.run"
EXE=""
case "$(uname -s 2>/dev/null)" in MINGW* | MSYS* | CYGWIN*) EXE=".exe" ;; esac

die() {
    echo "error: $*" >&2
    exit 1
}

hint() {
    echo "hint: $*" >&2
}

# env_value NAME [DEFAULT]: the environment wins, then .env in the repository root, then DEFAULT.
env_value() {
    local name=$1 default=${2-} line
    if [[ -n "${!name-}" ]]; then
        printf '%s\n' "${!name}"
        return
    fi
    if [[ -f "$ENV_FILE" ]]; then
        line=$(grep -E "^[[:space:]]*${name}[[:space:]]*=" "$ENV_FILE" | tail -n 1 || true)
        if [[ -n "$line" ]]; then
            line=${line#*=}
            line=${line#"${line%%[![:space:]]*}"}
            line=${line%"${line##*[![:space:]]}"}
            line=${line#\"}
            line=${line%\"}
            printf '%s\n' "$line"
            return
        fi
    fi
    printf '%s\n' "$default"
}

# The release binaries that scripts/setup builds (PYRUN_SERVER_BIN / PYRUN_CLIENT_BIN override).
server_bin() {
    local bin=${PYRUN_SERVER_BIN:-$ROOT/target/release/pyrun-mcp-server$EXE}
    [[ -x "$bin" ]] || die "no server binary at $bin
hint: build it with scripts/setup.sh (or set PYRUN_SERVER_BIN)"
    printf '%s\n' "$bin"
}

client_bin() {
    local bin=${PYRUN_CLIENT_BIN:-$ROOT/target/release/pyrun-mcp-client$EXE}
    [[ -x "$bin" ]] || die "no client binary at $bin
hint: build it with scripts/setup.sh (or set PYRUN_CLIENT_BIN)"
    printf '%s\n' "$bin"
}

# pid_alive PID: true while that process exists.
pid_alive() {
    kill -0 "$1" 2>/dev/null
}

# start_failed PID_FILE LOG_FILE MESSAGE [PID]: a start script gives up: stops PID (if given,
# still running), forgets it, shows the end of its log and dies with MESSAGE.
start_failed() {
    [[ -z ${4-} ]] || kill -TERM "$4" 2>/dev/null || true
    rm -f "$1"
    tail -n 20 "$2" >&2
    die "$3"
}

# stop_script PID_FILE NAME URL_FILE [ARGS...]: the whole of a stop script: no option but --help,
# then stop_pid_file, then the URL it had published is removed.
stop_script() {
    local pid_file=$1 name=$2 url_file=$3
    shift 3
    case ${1-} in
    -h | --help) sed -n '2,4p' "$0"; exit 0 ;;
    "") ;;
    *) die "unknown option '$1' (see --help)" ;;
    esac
    stop_pid_file "$pid_file" "$name"
    rm -f "$url_file"
}

# stop_pid_file FILE NAME: stops the process recorded in FILE (only that pid, and only if its
# command is NAME), waiting up to 10 s before SIGKILL; removes FILE.
stop_pid_file() {
    local file=$1 name=$2 pid comm i
    if [[ ! -f "$file" ]]; then
        echo "$name is not running (no $file)"
        return 0
    fi
    pid=$(tr -dc '0-9' <"$file")
    if [[ -z "$pid" ]] || ! pid_alive "$pid"; then
        echo "$name is not running (stale $file removed)"
        rm -f "$file"
        return 0
    fi
    comm=$(ps -p "$pid" -o comm= 2>/dev/null || true)
    # Linux cuts a process name to 15 characters.
    if [[ "$comm" != *"${name:0:15}"* ]]; then
        rm -f "$file"
        die "pid $pid from $file is '$comm', not $name: left it alone and removed the stale pid file"
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        pid_alive "$pid" || break
        sleep 0.1
    done
    if pid_alive "$pid"; then
        echo "$name (pid $pid) ignored SIGTERM for 10 s: sending SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$file"
    echo "$name stopped (pid $pid)"
}
