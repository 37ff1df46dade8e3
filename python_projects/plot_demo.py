"""Draws a plot with matplotlib: `plt.show()` hands the figure back as a PNG.

Run through pyrun-mcp, the figure comes back as an image in the result (and a link to the file);
run by hand, matplotlib shows it as usual. Without matplotlib, it says so and exits cleanly.
"""

import math
import sys

try:
    import matplotlib.pyplot as plt
except ImportError:
    print("matplotlib is not installed for this interpreter; install it (pip install matplotlib)"
          " to see the plot")
    sys.exit(0)

xs = [i / 10 for i in range(0, 63)]
plt.plot(xs, [math.sin(x) for x in xs], label="sin(x)")
plt.plot(xs, [math.cos(x) for x in xs], label="cos(x)")
plt.title("sin and cos")
plt.legend()
print("plotted sin and cos over one period")
plt.show()
