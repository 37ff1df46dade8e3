from .b import B_VALUE
from .inner import deep

A_VALUE = B_VALUE + 1
DEEP = deep.where()
