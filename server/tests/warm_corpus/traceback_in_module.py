# warm corpus: an uncaught error raised in a sibling package: paths and lines in the traceback
import helper_pkg.tools

print(helper_pkg.tools.double(2))
helper_pkg.tools.fail("nope")
