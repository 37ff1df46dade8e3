# warm corpus: sys.stdin/stdout/stderr: encoding, errors, buffering, identity
import io
import sys

for name in ("stdin", "stdout", "stderr"):
    s = getattr(sys, name)
    print(name, s.encoding, s.errors, "line_buffering", s.line_buffering, "write_through", s.write_through,
          "tty", s.isatty(), "fileno", s.fileno(), "mode", s.mode, "name", s.name,
          "is __%s__" % name, s is getattr(sys, "__%s__" % name), type(s.buffer).__name__,
          type(s.buffer.raw).__name__ if hasattr(s.buffer, "raw") else "-")
print("stdout newlines", repr(sys.stdout.newlines), "stdin newlines", repr(sys.stdin.newlines))
print(isinstance(sys.stdout, io.TextIOWrapper))
