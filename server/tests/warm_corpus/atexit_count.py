# warm corpus: the atexit handlers registered before the script registers any
import atexit

print("handlers at start", atexit._ncallbacks())
atexit.register(print, "the script's handler")
print("handlers now", atexit._ncallbacks())
