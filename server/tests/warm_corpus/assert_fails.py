# warm corpus: an assert statement fails as in a cold run (not optimised away)
print("__debug__", __debug__)
assert 1 + 1 == 3, "arithmetic is off"
