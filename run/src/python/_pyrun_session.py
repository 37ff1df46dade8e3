"""The driver of a pyrun-mcp session: one long-lived interpreter that runs the code it is sent.

Shipped by the server (run/python_support.rs) and started in a sandboxed run slot as
`python /pyrun/_pyrun_session.py SESSION_ID` (the id only names the process for people).

Wire: requests come on the interpreter's stdin pipe and replies go out on its stdout pipe, as
frames: a 4-byte big-endian length, then that many bytes of UTF-8 JSON. At start the driver
moves both pipes to private descriptors (os.dup: close-on-exec, so no subprocess inherits them),
points fd 0 at /dev/null and fd 1 at the stderr pipe. Nothing user code prints can then reach
the reply pipe: sys.stdout and sys.stderr are per-exec capture buffers, and anything written
straight to fds 1 and 2 (os.write, subprocesses, C extensions) goes down the stderr pipe, which
the server drains all the time. After each exec the driver writes the request's `marker` to the
stderr pipe (through its own private copy of it) before the reply: the server attributes the
pipe's bytes up to the marker to that exec.

Request: {"code": str, "max_output": int, "marker": str}
Reply:   {"stdout": str, "stderr": str, "stdout_truncated": bool, "stderr_truncated": bool,
          "result": str | null, "error": str | null}

SIGINT raises KeyboardInterrupt only while user code runs; at any other time it is ignored, so
a late interrupt never cuts a reply in half.
"""

import ast
import builtins
import io
import json
import linecache
import os
import signal
import struct
import sys
import traceback
import types

_DRIVER_FILE = os.path.abspath(__file__)
_PID = os.getpid()

_requests = os.dup(0)
_replies = os.dup(1)
_raw_err = os.dup(2)
_null = os.open(os.devnull, os.O_RDONLY)
os.set_inheritable(_null, False)
os.dup2(_null, 0)
os.dup2(_raw_err, 1)

# A REPL's path: the working folder first, not the driver's own folder.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(_DRIVER_FILE):
    sys.path[0] = ""


class _State:
    running = False
    execs = 0
    stdin = open(os.devnull, "r")


def _on_sigint(signum, frame):
    if _State.running:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, _on_sigint)


class _Capture(io.TextIOBase):
    """A stream that keeps at most `cap` bytes of UTF-8 text; closing it keeps what it holds."""

    def __init__(self, cap):
        super().__init__()
        self._parts = []
        self._size = 0
        self._cap = cap
        self.truncated = False

    @property
    def encoding(self):
        return "utf-8"

    def writable(self):
        return True

    def isatty(self):
        return False

    def write(self, text):
        if self.closed:
            raise ValueError("I/O operation on closed file.")
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not " + type(text).__name__)
        room = self._cap - self._size
        if room <= 0:
            if text:
                self.truncated = True
            return len(text)
        data = text.encode("utf-8", "replace")
        if len(data) > room:
            data = data[:room]
            self.truncated = True
        self._parts.append(data)
        self._size += len(data)
        return len(text)

    def text(self):
        return b"".join(self._parts).decode("utf-8", "replace")


def _read_exact(n):
    chunks = []
    while n:
        chunk = os.read(_requests, n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _reply(message):
    data = json.dumps(message, ensure_ascii=False).encode("utf-8", "replace")
    _write_all(_replies, struct.pack(">I", len(data)) + data)


def _without_driver(exc):
    """The traceback of `exc` without the driver's own frames (and so without its path)."""
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    seen = set()
    pending = [te]
    while pending:
        t = pending.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        t.stack[:] = [f for f in t.stack if os.path.abspath(f.filename) != _DRIVER_FILE]
        for other in (t.__cause__, t.__context__):
            if other is not None:
                pending.append(other)
        for group in getattr(t, "exceptions", None) or ():
            pending.append(group)
    return "".join(te.format())


_main = types.ModuleType("__main__")
_main.__dict__["__builtins__"] = builtins
sys.modules["__main__"] = _main
_namespace = _main.__dict__


def _run(code, max_output):
    _State.execs += 1
    name = "<exec-%d>" % _State.execs
    # Tracebacks of this code (now and in later execs) show its lines.
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    out, err = _Capture(max_output), _Capture(max_output)
    result = error = None
    # Put back what earlier code may have closed or replaced.
    for fd, target in ((0, _null), (1, _raw_err), (2, _raw_err)):
        try:
            os.dup2(target, fd)
        except OSError:
            pass
    if _State.stdin.closed:
        _State.stdin = open(os.devnull, "r")
    sys.stdin = _State.stdin
    saved = (sys.stdout, sys.stderr)
    sys.stdout, sys.stderr = out, err
    try:
        _State.running = True
        try:
            tree = ast.parse(code, name, "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, name, "exec"), _namespace)
            if last is not None:
                value = eval(compile(last, name, "eval"), _namespace)
                if value is not None:
                    builtins._ = value
                    result = repr(value)
                    if len(result) > max_output:
                        result = result[:max_output]
        finally:
            _State.running = False
    except BaseException as exc:  # noqa: B036 - SystemExit and KeyboardInterrupt are results too
        _State.running = False
        error = _without_driver(exc)
    finally:
        _State.running = False
        sys.stdout, sys.stderr = saved
    return {
        "stdout": out.text(),
        "stderr": err.text(),
        "stdout_truncated": out.truncated,
        "stderr_truncated": err.truncated,
        "result": result,
        "error": error,
    }


def _serve():
    while True:
        head = _read_exact(4)
        if head is None:
            return
        (size,) = struct.unpack(">I", head)
        body = _read_exact(size)
        if body is None:
            return
        request = json.loads(body.decode("utf-8"))
        reply = _run(request["code"], int(request["max_output"]))
        # A process the code forked comes back here too: only the driver itself answers.
        if os.getpid() != _PID:
            os._exit(0)
        _write_all(_raw_err, request["marker"].encode("ascii"))
        _reply(reply)


if __name__ == "__main__":
    while True:
        try:
            _serve()
            break
        except KeyboardInterrupt:
            # A SIGINT that raced the end of an exec: the server waits for the reply anyway.
            continue
    os._exit(0)
