# warm corpus: a source file that starts with a UTF-8 byte order mark
print("bom read", "é")
with open(__file__, "rb") as f:
    print(f.read(3))
