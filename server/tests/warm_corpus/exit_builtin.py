# warm corpus: site's exit() builtin exits with its code
print("calling exit(5)")
exit(5)
