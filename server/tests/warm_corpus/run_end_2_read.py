# warm corpus: reads what run_end_1_leftovers left behind (its open file and its finalizer's file)
for name in ("run_end_open.txt", "run_end_finalizer.txt"):
    with open(name) as f:
        print(name, repr(f.read()))
