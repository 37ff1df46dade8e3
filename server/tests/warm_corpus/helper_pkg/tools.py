def double(x):
    return 2 * x


def fail(x):
    return {"a": 1}[x]
