# warm corpus: the working directory is the script's folder; relative and __file__-based paths
import os

print("cwd is the script's folder", os.getcwd() == os.path.dirname(__file__))
print("cwd", os.getcwd())
with open("data/values.txt") as f:
    print("relative", f.read().split())
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "values.txt")) as f:
    print("by __file__", f.read().split())
print("PWD", os.environ.get("PWD"))
