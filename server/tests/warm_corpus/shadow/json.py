"""A project module named like the stdlib's: a script in this folder imports this one."""
print("project json.py imported")
SOURCE = "project json"
