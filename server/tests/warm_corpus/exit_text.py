# warm corpus: SystemExit with a text prints it to stderr and exits 1
print("about to exit")
raise SystemExit("the text of the exit")
