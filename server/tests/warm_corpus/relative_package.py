# warm corpus: a sibling package's relative imports, and the modules they add
import sys

import pkg_rel

print(pkg_rel.a.A_VALUE, pkg_rel.a.DEEP)
print(sorted(m for m in sys.modules if m.startswith("pkg_rel")))
print(pkg_rel.__path__)
