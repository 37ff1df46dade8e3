# warm corpus: a project logging/ package beside the script wins over the stdlib's
import logging

print(getattr(logging, "SOURCE", "stdlib logging"))
print(logging.__file__)
print(hasattr(logging, "getLogger"))
