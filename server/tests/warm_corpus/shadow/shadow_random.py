# warm corpus: a project random.py beside the script wins over the stdlib's
import random

print(getattr(random, "SOURCE", "stdlib random"))
print(random.__file__)
print(hasattr(random, "random"))
