# warm corpus: a project json.py beside the script wins over the stdlib's
import json

print(getattr(json, "SOURCE", "stdlib json"))
print(json.__file__)
print(hasattr(json, "dumps"))
