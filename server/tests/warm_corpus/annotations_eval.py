# warm corpus: annotations are evaluated (no __future__ flag inherited from whoever compiled the script)
import __future__


def f(x: int, y: "str") -> list[int]:
    return [x]


print(f.__annotations__)
print(__annotations__ if "__annotations__" in globals() else "no module annotations")
value: float = 1.5
print(__annotations__)
print(f.__code__.co_flags & __future__.annotations.compiler_flag != 0)
