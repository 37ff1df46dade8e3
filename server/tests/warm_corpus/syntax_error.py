# warm corpus: a script that does not compile: the SyntaxError text and exit code
print("never printed")
def broken(:
    pass
