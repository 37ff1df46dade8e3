"""A few arithmetic checks; prints each result and ends with a summary line."""


def add(a, b):
    return a + b


def divide(a, b):
    return a / b


checks = [
    ("2 + 3", add(2, 3), 5),
    ("10 / 4", divide(10, 4), 2.5),
    ("7 * 6", 7 * 6, 42),
    ("2 ** 10", 2**10, 1024),
]
for label, got, expected in checks:
    assert got == expected, f"{label}: expected {expected}, got {got}"
    print(f"{label} = {got}")
print("All tests passed!")
