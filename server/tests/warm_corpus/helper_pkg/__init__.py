"""A sibling package."""
print("helper_pkg imported")
from .tools import double  # noqa: E402
