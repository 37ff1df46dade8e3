# warm corpus: sys.exit(3)
import sys

print("exit 3")
sys.exit(3)
