"""A project module named like the stdlib's: a script in this folder imports this one."""
print("project random.py imported")
SOURCE = "project random"
