from .. import b


def where():
    return (__name__, __package__, b.B_VALUE)
