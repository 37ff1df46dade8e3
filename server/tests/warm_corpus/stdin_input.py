# warm corpus: input() reads lines of the given stdin and prints its prompt to stdout
# stdin: "alpha\nbeta\n"
first = input("prompt one> ")
second = input("prompt two> ")
print()
print(repr(first), repr(second))
try:
    input("prompt three> ")
except EOFError:
    print()
    print("EOF on the third")
