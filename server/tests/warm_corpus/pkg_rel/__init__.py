from . import a  # noqa: F401
