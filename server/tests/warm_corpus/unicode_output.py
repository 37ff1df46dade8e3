# warm corpus: non-ASCII output, and an unencodable surrogate's error
print("héllo wörld ✓ 雪 🐍")
import sys  # noqa: E402

sys.stdout.buffer.write("bytes written raw: ü\n".encode())
sys.stdout.flush()
print("\udcff")
