# warm corpus: the project fractions.py added since is the one imported, not the stdlib's learned earlier
import fractions

print(getattr(fractions, "SOURCE", "stdlib fractions"))
print(fractions.__file__)
