# warm corpus: reads what unflushed_1_write left unclosed (it must be on disk)
import os

with open("unflushed.txt") as f:
    print(repr(f.read()))
print(os.path.getsize("unflushed.bin"))
