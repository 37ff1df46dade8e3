# warm corpus: a lot of output on both streams, all of it kept in order
import sys

for i in range(3000):
    print(f"line {i:05d} " + "x" * 40)
    if i % 100 == 0:
        print(f"err {i}", file=sys.stderr)
print("end")
