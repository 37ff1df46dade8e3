# warm corpus: sys.exit(256) exits with 0, as the kernel keeps 8 bits
import sys

print("exit 256")
sys.exit(256)
