# warm corpus: unittest.main() finds the tests of __main__ and exits with its verdict
import io
import re
import sys
import unittest


class Checks(unittest.TestCase):
    def test_passes(self):
        self.assertEqual(1 + 1, 2)

    def test_fails(self):
        self.assertEqual(1 + 1, 3)


stream = io.StringIO()
program = unittest.main(exit=False, testRunner=unittest.TextTestRunner(stream=stream, verbosity=2))
print(re.sub(r"in \d+\.\d+s", "in (time)", stream.getvalue()), file=sys.stderr)
print(program.result.testsRun, len(program.result.failures))
sys.exit(not program.result.wasSuccessful())
