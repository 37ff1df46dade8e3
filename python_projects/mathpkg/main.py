"""Imports a sibling module, as users expect when the script's folder is the working directory."""
import sys

from geometry import circle_area

radius = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
print(f"Area of a circle of radius {radius}: {circle_area(radius):.2f}")
