"""A tiny package: main.py imports its sibling module geometry.py."""
