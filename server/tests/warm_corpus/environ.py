# warm corpus: the environment a run sees, keys and values
import os

for key in sorted(os.environ):
    print(key, "=", os.environ[key])
print("environb agrees", sorted(os.environb) == sorted(k.encode() for k in os.environ))
