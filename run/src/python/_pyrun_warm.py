"""The driver of a pyrun-mcp warm run: an interpreter started ahead of its run, in the run's own
sandbox, that has imported a preload set and then runs ONE script as `python SCRIPT ARGS...` would.

Shipped by the server (run/python_support.rs) and started exactly as a run is started (same
sandbox, slot, environment, working folder), as `python /pyrun/_pyrun_warm.py PRELOAD`, where
PRELOAD is a comma-separated list of module names (possibly empty). Steps:

1. fds 0, 1 and 2 are kept aside (os.dup: close-on-exec) and pointed at /dev/null (stdin) and a
   memfd (stdout, stderr) while the preload imports: nothing an import prints reaches the run's
   output, and nothing reads the job pipe.
2. Each preload name is imported only when it resolves to the interpreter's standard library, its
   site-packages (the venv's) or the server's support folder, with the projects folder off the
   path: never a project source. An import that prints, changes a signal handler, starts a
   Python thread or loads a file from elsewhere is noisy; the environment, `sys.path` and the
   working folder are restored after the imports.
3. `compile()` is called once (its first call makes the AST types, ~0.6 ms a cold start does not
   pay: it compiles its script without them), then `gc.freeze()`: what the preload made is
   never traversed again (and not at exit).
4. fds 1 and 2 are restored and READY is written on stdout, then a 4-byte big-endian length and
   the noisy names, one per line; the server reads them before the job, and a spare with noisy
   names serves no run (what it imported cannot be unloaded).
5. The job comes on the original stdin: a 4-byte big-endian length, then UTF-8 JSON
   {"argv": [script, args...], "cwd": str, "stdin": bool, "report": str | null}. Without
   "stdin" fd 0 stays /dev/null; with it fd 0 is the pipe again (the run's input follows the job).
6. Modules the preload added whose name a file or package in the script's folder (or an import
   folder on PYTHONPATH) would shadow are dropped from `sys.modules`, so the project's own file is
   imported, as a cold run would.
7. The script runs as `__main__` in a fresh module, with `sys.argv`, `sys.orig_argv`, `sys.path[0]`
   and `__file__` as CPython sets them. SystemExit leaves as it would; another uncaught exception
   goes to `sys.excepthook` without this driver's frame, and the exit status is 1.
8. At exit, after the script's atexit handlers, the names of the modules the run loaded from the
   allowed places are written to "report" (a file of the run's scratch): what the server learns
   to preload (it keeps what earlier reports said).
9. Last of all the atexit handlers (registered before the preload), when what is left of the
   interpreter's finalization could neither write a byte nor change a file or the exit status,
   the streams are flushed as the finalization would flush them and the process ends with the
   script's status (`os._exit`): the finalization (1.5-3 ms, its preloaded modules torn down)
   is off the run's path. It could when anything is left that has a finalizer: another thread,
   a replaced `sys.stdout`, an object made by the run whose type is not plain data (an open
   file, a generator, a `__del__`, a weakref callback, a `Popen`, an extension type), a shared
   library the run loaded, collector debugging; then the interpreter ends as usual.
"""

import sys

# What a cold start has loaded when the script's first line runs: everything the driver or its
# preload adds beyond this may be shadowed by a project file (step 6).
_BASELINE = set(sys.modules)

import atexit
import builtins
import gc
import importlib
import importlib.machinery
import importlib.util
import io
import json
import os
import signal
import _thread
import types
from _weakref import ref as _WeakRef

try:
    import ctypes

    # The C library, loaded once before the preload (its ctypes classes are frozen with it).
    _LIBC = ctypes.CDLL(None)
    _FFLUSH = _LIBC.fflush
except (ImportError, OSError, AttributeError):
    ctypes = _LIBC = _FFLUSH = None

_READY = b"\x00pyrun-warm-ready\n"
_MAX_JOB = 1 << 20
_MAX_REPORT = 256 * 1024
# Modules never preloaded: their import is the point (prints, opens a browser, starts a GUI,
# runs the regression tests: `test.autotest`), or they are this server's own. No part of a name
# may be `__main__` either: `venv.__main__`, `unittest.__main__`, `pip.__main__` run a program
# with the driver's argv, in the run's working folder, before any run asked for it.
_NEVER = {
    "__main__", "__mp_main__", "this", "antigravity", "__hello__", "__phello__", "idlelib",
    "tkinter", "turtle", "turtledemo", "site", "sitecustomize", "usercustomize", "_pyrun_warm",
    "_pyrun_session", "test",
}
_DRIVER_DIR = os.path.dirname(os.path.abspath(__file__))


def _allowed_roots():
    """Where a preloaded module may come from: the standard library (with lib-dynload), the
    site-packages folders, the server's support folder."""
    import site

    roots = [os.path.dirname(os.__file__), _DRIVER_DIR]
    try:
        roots.extend(site.getsitepackages())
    except AttributeError:
        pass
    return tuple(os.path.join(os.path.abspath(r), "") for r in roots if r)


_ROOTS = _allowed_roots()


def _under_roots(path):
    if not path:
        return False
    path = os.path.abspath(path)
    return any(path.startswith(root) or path + os.sep == root for root in _ROOTS)


def _allowed_module(module):
    """Whether a loaded module came from an allowed place. One without a file (made in memory by
    the code that imported it, e.g. Cython's shared modules) counts as its importer's."""
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None) if spec is not None else None
    if origin in ("built-in", "frozen"):
        return True
    if origin and os.path.isabs(origin):
        return _under_roots(origin)
    # A namespace package: every portion must lie in an allowed place.
    locations = list(getattr(spec, "submodule_search_locations", None) or [])
    return all(_under_roots(p) for p in locations)


def _valid_name(name):
    parts = name.split(".")
    return (
        0 < len(name) <= 200
        and all(part.isidentifier() and part != "__main__" for part in parts)
        and parts[0] not in _NEVER
    )


def _handlers():
    return [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE)]


def _threads():
    threading = sys.modules.get("threading")
    return threading.active_count() if threading else 1


def _preload(names, sink):
    """Step 2. Returns the names whose import printed or changed the process: such a spare is
    not used (its modules cannot be unloaded: an extension module loads once per process), and
    the server never preloads them again."""
    noisy = []
    saved_path, saved_env, saved_cwd = list(sys.path), dict(os.environ), os.getcwd()
    sys.path[:] = [p for p in sys.path if p and _under_roots(p)]
    sys.path_importer_cache.clear()
    try:
        for name in names:
            if not _valid_name(name) or name in sys.modules:
                continue
            top = name.split(".")[0]
            if top not in sys.modules:
                try:
                    spec = importlib.util.find_spec(top)
                except BaseException:
                    continue
                if spec is None:
                    continue
                if spec.origin not in ("built-in", "frozen") and not (
                    _under_roots(spec.origin)
                    if spec.origin
                    else all(_under_roots(p) for p in spec.submodule_search_locations or ())
                ):
                    continue
            before = set(sys.modules)
            size, handlers, threads = os.fstat(sink).st_size, _handlers(), _threads()
            try:
                importlib.import_module(name)
            except BaseException:
                pass
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            added = set(sys.modules) - before
            if (
                os.fstat(sink).st_size != size
                or _handlers() != handlers
                or _threads() != threads
                or any(not _allowed_module(sys.modules[m]) for m in added if m in sys.modules)
            ):
                noisy.append(name)
    finally:
        sys.path[:] = saved_path
        sys.path_importer_cache.clear()
        if dict(os.environ) != saved_env:
            os.environ.clear()
            os.environ.update(saved_env)
        if os.getcwd() != saved_cwd:
            os.chdir(saved_cwd)
    return noisy


def _read_exact(fd, n):
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _read_job(fd):
    header = _read_exact(fd, 4)
    if header is None:
        return None
    length = int.from_bytes(header, "big")
    if length > _MAX_JOB:
        return None
    body = _read_exact(fd, length)
    return None if body is None else json.loads(body.decode("utf-8"))


def _script_dir(script):
    """sys.path[0] for `python SCRIPT`: the folder of the script, links of the file followed."""
    path = script
    for _ in range(40):
        try:
            target = os.readlink(path)
        except OSError:
            break
        path = os.path.join(os.path.dirname(path), target)
    return os.path.dirname(path)


def _shadow_names(folder):
    """Top-level module names a folder's entries would provide before site-packages."""
    names = set()
    try:
        entries = os.listdir(folder)
    except OSError:
        return names
    suffixes = importlib.machinery.all_suffixes()
    for entry in entries:
        for suffix in suffixes:
            if entry.endswith(suffix):
                names.add(entry[: -len(suffix)])
                break
        else:
            # A package is a folder with an `__init__` of any suffix (`__init__.pyc`, an
            # extension module), as the path finder sees it.
            package = os.path.join(folder, entry, "__init__")
            if any(os.path.isfile(package + suffix) for suffix in suffixes):
                names.add(entry)
    return names


def _drop_shadowed(folders):
    """Step 6."""
    added_tops = {m.split(".")[0] for m in set(sys.modules) - _BASELINE}
    shadowed = set()
    for folder in folders:
        shadowed |= _shadow_names(folder) & added_tops
    if shadowed:
        for name in [m for m in list(sys.modules) if m.split(".")[0] in shadowed]:
            sys.modules.pop(name, None)


def _report_at_exit(path):
    """Step 8: registered before the script, so it runs after the script's own handlers."""

    # Only what the run added: the server keeps what earlier reports taught it.
    at_job = set(sys.modules)

    def report():
        if os.getpid() != _PID:
            return
        names = sorted(
            name
            for name, module in list(sys.modules.items())
            if name not in at_job
            and _valid_name(name)
            and module is not None
            and _allowed_module(module)
        )
        data = "\n".join(names).encode()[:_MAX_REPORT]
        try:
            # Never through a link, and never waiting on a FIFO the script put there.
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK
            fd = os.open(path, flags, 0o600)
        except OSError:
            return
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    atexit.register(report)


def _set_cmdline(argv):
    """`ps` and /proc/PID/cmdline show the run's command line, as for a cold start: it is written
    over the process's own argv strings (which the server padded for that), found from glibc's
    `program_invocation_name` (argv[0]), only when they still hold the driver's command line; cut
    to fit."""
    try:
        if _LIBC is None or not _ORIG_ARGV:
            return
        start = ctypes.c_void_p.in_dll(_LIBC, "program_invocation_name").value
        expected = b"\0".join(os.fsencode(a) for a in _ORIG_ARGV) + b"\0"
        room = len(expected)
        if not start or ctypes.string_at(start, room) != expected:
            return
        new = b"\0".join(os.fsencode(a) for a in argv)[: room - 1]
        ctypes.memmove(start, new + b"\0" * (room - len(new)), room)
    except Exception:
        pass


def _main_module(script):
    main = types.ModuleType("__main__")
    main.__file__ = script
    main.__cached__ = None
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", script)
    main.__builtins__ = builtins
    # CPython's __main__ starts with an empty __annotations__, whatever the script holds.
    main.__annotations__ = {}
    sys.modules["__main__"] = main
    # A preloaded multiprocessing aliased __mp_main__ to this driver's module at its import.
    if "__mp_main__" in sys.modules:
        sys.modules["__mp_main__"] = main
    return main


_PID = os.getpid()
_NOISY = []
# The script's exit status once it has ended without a signal (step 9), else empty.
_ENDED = []
# The command line the process was started with (argv[0] as the server gave it).
_ORIG_ARGV = list(getattr(sys, "orig_argv", None) or [])


# Step 9. Types whose objects a finalization frees without running any code of the run's or
# writing anything: plain data and the parts of functions, classes and modules.
_PLAIN = {
    dict, list, tuple, set, frozenset, bytearray, type, types.FunctionType, types.ModuleType,
    types.MethodType, types.BuiltinFunctionType, types.CellType, types.FrameType,
    types.TracebackType, types.CodeType, types.SimpleNamespace, types.MappingProxyType,
    types.GetSetDescriptorType, types.MemberDescriptorType, types.MethodDescriptorType,
    types.WrapperDescriptorType, types.ClassMethodDescriptorType, property, classmethod,
    staticmethod, slice, range, type({}.keys()), type({}.values()), type({}.items()),
    int, float, complex, str, bytes, bool, type(None), type(NotImplemented), type(...),
}
# A file object closed already frees without writing (and its newline decoder with it).
_FILES = {io.FileIO, io.BufferedReader, io.BufferedWriter, io.BufferedRandom, io.TextIOWrapper}
_PLAIN.add(io.IncrementalNewlineDecoder)
_HEAPTYPE = 1 << 9
_SCAN_MAX = 20000


def _plain_class(cls, seen):
    """Whether instances of `cls` free without running code: every class of its MRO is plain,
    a built-in exception, or a class without a `__del__` (a finalizer shows as one: PEP 442)."""
    verdict = seen.get(cls)
    if verdict is None:
        verdict = all(
            c is object
            or c in _PLAIN
            or (issubclass(c, BaseException) and not c.__flags__ & _HEAPTYPE)
            or (c.__flags__ & _HEAPTYPE and "__del__" not in c.__dict__)
            for c in cls.__mro__
        )
        seen[cls] = verdict
    return verdict


def _quiet_end():
    """Whether the rest of the finalization could write nothing and change nothing (step 9)."""
    if sys.stdout is not sys.__stdout__ or sys.stderr is not sys.__stderr__:
        return False
    if gc.get_debug() or gc.garbage or sys.flags.dev_mode or sys.flags.verbose or _MALLOC_STATS:
        return False
    # Another thread (the non-daemon ones were joined before the atexit handlers), or an
    # extension module the run loaded (its C code may write or register exit handlers).
    count = getattr(_thread, "_count", None)
    if _READY_MODULES is None or count is None or count() != 0:
        return False
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    for name in set(sys.modules) - _READY_MODULES:
        origin = getattr(getattr(sys.modules[name], "__spec__", None), "origin", None)
        if not isinstance(origin, str) or origin.endswith(suffixes):
            return False
    objects = gc.get_objects()
    if len(objects) > _SCAN_MAX:
        return False
    seen = {}
    for obj in objects:
        cls = type(obj)
        if cls in _PLAIN or _plain_class(cls, seen):
            if ctypes is not None and isinstance(obj, ctypes.CDLL):
                # A library loaded by hand: its exit code runs in exit().
                return False
            continue
        if cls is _WeakRef and obj.__callback__ is None:
            continue
        if cls in _FILES and obj.closed:
            continue
        return False
    # What the run's objects hold that the collector does not track (extension objects):
    # tracked ones were looked at above or are the spare's own (frozen).
    for obj in gc.get_referents(*objects):
        cls = type(obj)
        if cls in _PLAIN or gc.is_tracked(obj):
            continue
        return False
    return True


def _exit_early():
    """Step 9: registered before any other atexit handler, so it runs after all of them."""
    if os.getpid() != _PID or not _ENDED:
        return
    try:
        if not _quiet_end():
            return
        # As the finalization flushes them; a failing flush is left to it (it sets status 120).
        sys.stdout.flush()
        sys.stderr.flush()
        if _FFLUSH is not None:
            # What C code left in its stdio buffers, as exit() would write it.
            _FFLUSH(None)
    except BaseException:
        return
    os._exit(_ENDED[0])


atexit.register(_exit_early)
# The finalization prints the allocator's statistics then.
_MALLOC_STATS = bool(os.environ.get("PYTHONMALLOCSTATS"))
# The modules the spare had when it was ready.
_READY_MODULES = None


def _status(code):
    """The exit status CPython gives a SystemExit's code, when it is a plain one (else None:
    the interpreter ends as usual)."""
    if code is None:
        return 0
    if isinstance(code, int) and 0 <= code <= 255:
        return int(code)
    return None


def _serve():
    job_fd, out_fd, err_fd = os.dup(0), os.dup(1), os.dup(2)
    # Read-only, as the /dev/null a cold run without stdin has on fd 0.
    null = os.open(os.devnull, os.O_RDONLY)
    sink = os.memfd_create("pyrun-preload", 0)
    os.dup2(null, 0)
    os.dup2(sink, 1)
    os.dup2(sink, 2)
    names = [n for n in (sys.argv[1] if len(sys.argv) > 1 else "").strip().split(",") if n]
    _NOISY.extend(_preload(names, sink))
    global _READY_MODULES
    _READY_MODULES = frozenset(sys.modules)
    compile("", "<pyrun-warm>", "exec", dont_inherit=True)
    gc.collect()
    gc.freeze()
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    for fd in (out_fd, err_fd, sink):
        os.close(fd)
    noisy = "\n".join(_NOISY).encode()
    os.write(1, _READY + len(noisy).to_bytes(4, "big") + noisy)

    job = _read_job(job_fd)
    if job is None:
        # Not a success: the server closed the pipe (it stops a spare so), or something else
        # read the job. A run whose script never ran must not say exit 0.
        os._exit(70)
    if job.get("stdin"):
        os.dup2(job_fd, 0)
    os.close(job_fd)
    os.close(null)

    argv = [str(a) for a in job["argv"]]
    script = argv[0]
    _set_cmdline(_ORIG_ARGV[:1] + argv)
    os.chdir(job["cwd"])
    if job.get("report"):
        _report_at_exit(job["report"])
    sys.argv = argv
    if _ORIG_ARGV:
        sys.orig_argv = _ORIG_ARGV[:1] + argv
    sys.path[0] = _script_dir(script)
    import_dirs = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    _drop_shadowed([sys.path[0]] + [p for p in import_dirs if not _under_roots(p)])
    return script


def _uncaught(error, tb):
    """An uncaught exception reported as CPython reports one: `tb` (the traceback without this
    driver's frame) becomes the exception's own, which is what the default hook prints; it is
    kept in `sys.last_*` for the atexit handlers; then `sys.excepthook`."""
    error.__traceback__ = tb
    sys.last_type, sys.last_value, sys.last_traceback = type(error), error, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = error
    sys.excepthook(type(error), error, tb)


def _run(script):
    with open(script, "rb") as f:
        source = f.read()
    main = _main_module(script)
    try:
        code = compile(source, script, "exec", dont_inherit=True)
    except SyntaxError as e:
        # As a cold start reports it: the place in the source, no traceback.
        _uncaught(e, None)
        _ENDED.append(1)
        raise SystemExit(1)
    try:
        exec(code, main.__dict__)
    except SystemExit as e:
        status = _status(e.code)
        if status is not None:
            _ENDED.append(status)
        raise
    except BaseException as e:
        _uncaught(e, e.__traceback__.tb_next if e.__traceback__ else None)
        if isinstance(e, KeyboardInterrupt):
            # Leaves this module uncaught, reported already: CPython then ends as after a cold
            # script's (threads joined, atexit handlers, files flushed, then death by SIGINT).
            sys.excepthook = lambda *_: None
            raise
        _ENDED.append(1)
        raise SystemExit(1)
    _ENDED.append(0)


_run(_serve())
