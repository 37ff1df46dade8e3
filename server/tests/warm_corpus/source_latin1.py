# warm corpus: a source file in latin-1, as its coding line says
# -*- coding: latin-1 -*-
text = "café über"
print(text, len(text), ascii(text))
import sys  # noqa: E402

print(open(__file__, "rb").read().count(b"\xe9"))
