"""A sibling module: says when it is imported (once per run)."""
print("helper_mod imported as", __name__)
VALUE = 41


def answer():
    return VALUE + 1
