# warm corpus: tempfile's folder follows the run's TMPDIR, found on first use
import os
import tempfile

print("tempdir before use", tempfile.tempdir)
print("gettempdir", tempfile.gettempdir())
print("TMPDIR", os.environ.get("TMPDIR"))
with tempfile.TemporaryDirectory() as d:
    print("temporary directory in it", os.path.dirname(d) == tempfile.gettempdir())
print("HOME", os.environ.get("HOME"), os.path.expanduser("~"))
