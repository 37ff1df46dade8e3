"""A project package named like the stdlib's: a script in this folder imports this one."""
print("project logging package imported")
SOURCE = "project logging"
