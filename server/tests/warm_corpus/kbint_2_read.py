# warm corpus: reads what kbint_1_threads_files left unclosed when it was interrupted
with open("kbint.txt") as f:
    print(repr(f.read()))
