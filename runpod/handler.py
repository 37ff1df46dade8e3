"""pyrun-mcp's RunPod serverless worker.

A job's input carries a project snapshot (a gzip'd tar, base64), the script's path in it, its
arguments, stdin and time limit. The handler unpacks the snapshot in a fresh folder, runs the
script there with pyrun's run semantics (argv, stdin, the script's folder as cwd, an allowlisted
environment, output caps, a timeout that kills the whole process group), yields stdout/stderr
chunks as they come (a generator handler: RunPod streams them), and yields last an `end` chunk:
the exit code, what was cut, and the files the script left in PYRUN_OUTPUT_DIR.

Written against RunPod's own SDK (`runpod` on PyPI, pinned in requirements.txt).
"""

import base64
import codecs
import io
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

import runpod

# The environment a script sees: these names only (never the worker's RunPod keys).
ALLOWED_ENV = (
    "PATH", "LANG", "LANGUAGE", "TZ", "PYTHONIOENCODING", "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
)
DEFAULT_MAX_OUTPUT = 1 << 20
MAX_ARTIFACT_FILES = 50
MAX_ARTIFACT_BYTES = 8 << 20
# How long output is gathered before a chunk is sent.
CHUNK_SECONDS = 0.2
CHUNK_BYTES = 32 << 10


def scrubbed_env(work, output_dir):
    env = {k: v for k, v in os.environ.items() if k in ALLOWED_ENV or k.startswith("LC_")}
    env.update(
        HOME=work,
        TMPDIR=os.path.join(work, "tmp"),
        PYRUN_OUTPUT_DIR=output_dir,
        MPLBACKEND="Agg",
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


def unpack(snapshot_b64, dest):
    data = base64.b64decode(snapshot_b64)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        data_filter = getattr(tarfile, "data_filter", None)
        if data_filter is not None:
            tar.extractall(dest, filter=data_filter)
            return
        root = os.path.realpath(dest)
        for member in tar.getmembers():
            target = os.path.realpath(os.path.join(dest, member.name))
            within = target == root or target.startswith(root + os.sep)
            if not (member.isfile() or member.isdir()) or not within:
                raise ValueError(f"snapshot entry refused: {member.name!r}")
        tar.extractall(dest)


def inside(root, relative):
    path = os.path.realpath(os.path.join(root, relative))
    if not path.startswith(os.path.realpath(root) + os.sep) or not os.path.isfile(path):
        raise ValueError(f"the script {relative!r} is not in the snapshot")
    return path


def collect_artifacts(output_dir):
    files, skipped, total = [], [], 0
    for folder, dirs, names in os.walk(output_dir, followlinks=False):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, output_dir).replace(os.sep, "/")
            if os.path.islink(path) or not os.path.isfile(path):
                skipped.append({"name": rel, "reason": "not a regular file"})
                continue
            size = os.path.getsize(path)
            if len(files) >= MAX_ARTIFACT_FILES or total + size > MAX_ARTIFACT_BYTES:
                skipped.append({"name": rel, "reason": "over the worker's artifact caps"})
                continue
            with open(path, "rb") as f:
                files.append({"name": rel, "data": base64.b64encode(f.read()).decode()})
            total += size
    return files, skipped


def feed_stdin(proc, text):
    try:
        if text:
            proc.stdin.write(text.encode())
        proc.stdin.close()
    except OSError:
        pass


def handler(job):
    job_input = job["input"]
    timeout = float(job_input.get("timeout_seconds", 30))
    max_output = int(job_input.get("max_output_bytes", DEFAULT_MAX_OUTPUT))
    work = tempfile.mkdtemp(prefix="pyrun-")
    try:
        project = os.path.join(work, "project")
        output_dir = os.path.join(work, "output")
        for folder in (project, output_dir, os.path.join(work, "tmp")):
            os.makedirs(folder)
        unpack(job_input["snapshot"], project)
        script = inside(project, job_input["script"])
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, script, *[str(a) for a in job_input.get("args", [])]],
            cwd=os.path.dirname(script),
            env=scrubbed_env(work, output_dir),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: a timeout kills the whole tree
        )
        threading.Thread(target=feed_stdin, args=(proc, job_input.get("stdin")), daemon=True).start()
        yield from follow(proc, started, timeout, max_output, output_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def follow(proc, started, timeout, max_output, output_dir):
    streams = {proc.stdout: "stdout", proc.stderr: "stderr"}
    decoders = {name: codecs.getincrementaldecoder("utf-8")("replace") for name in streams.values()}
    sent = {"stdout": 0, "stderr": 0}
    truncated = {"stdout": False, "stderr": False}
    pending = {"stdout": [], "stderr": []}
    selector = selectors.DefaultSelector()
    for pipe in streams:
        selector.register(pipe, selectors.EVENT_READ)
    deadline = started + timeout
    timed_out = False
    last_flush = time.monotonic()

    def flush():
        for name in ("stdout", "stderr"):
            if pending[name]:
                text = "".join(pending[name])
                pending[name].clear()
                if text:
                    yield {name: text}

    while selector.get_map():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        for key, _ in selector.select(min(remaining, CHUNK_SECONDS)):
            data = os.read(key.fileobj.fileno(), 65536)
            name = streams[key.fileobj]
            if not data:
                selector.unregister(key.fileobj)
                continue
            room = max_output - sent[name]
            if len(data) > room:
                data, truncated[name] = data[:room], True
            sent[name] += len(data)
            pending[name].append(decoders[name].decode(data))
        if time.monotonic() - last_flush >= CHUNK_SECONDS or sum(
            len(t) for p in pending.values() for t in p
        ) >= CHUNK_BYTES:
            yield from flush()
            last_flush = time.monotonic()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    exit_code = proc.wait()
    selector.close()
    for name, decoder in decoders.items():
        pending[name].append(decoder.decode(b"", final=True))
    yield from flush()
    artifacts, skipped = collect_artifacts(output_dir)
    yield {
        "end": {
            "exit_code": None if timed_out or exit_code < 0 else exit_code,
            "signal": -exit_code if exit_code < 0 and not timed_out else None,
            "timed_out": timed_out,
            "stdout_truncated": truncated["stdout"],
            "stderr_truncated": truncated["stderr"],
            "duration_ms": int((time.monotonic() - started) * 1000),
            "artifacts": artifacts,
            "skipped_artifacts": skipped,
        }
    }


if __name__ == "__main__":
    runpod.serverless.start({"handler": handler})
