"""Prints two lines, then fails with a NameError (exit code 1)."""
print("This line prints fine.")
print("So does this one.")
print(undefined_variable)  # noqa: F821
