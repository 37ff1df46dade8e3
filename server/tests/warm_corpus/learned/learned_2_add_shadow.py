# warm corpus: adds a project fractions.py to this folder (as a user might, after runs used the stdlib's)
with open("fractions.py", "w") as f:
    f.write('print("project fractions.py imported")\nSOURCE = "project fractions"\n')
print("fractions.py written")
