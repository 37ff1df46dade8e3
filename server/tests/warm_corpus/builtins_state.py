# warm corpus: the builtins a script starts with
import builtins

print(__builtins__ is builtins)
names = sorted(n for n in dir(builtins) if not n.startswith("__"))
print(len(names))
print([n for n in names if n[0].islower()])
print("site's", [n for n in ("help", "exit", "quit", "copyright", "credits", "license") if hasattr(builtins, n)])
print("_" in dir(builtins))
print(type(builtins.__loader__).__name__, builtins.__spec__.name)
print(repr(exit))
print(builtins.open is open, print.__module__)
