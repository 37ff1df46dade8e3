# warm corpus: a large stdin arrives whole, nothing read ahead by anyone else
# stdin: "0123456789abcdef ü\n"
# stdin-times: 20000
import hashlib
import sys

data = sys.stdin.buffer.read()
print(len(data), data.count(b"\n"), hashlib.sha256(data).hexdigest())
print(data[:19])
