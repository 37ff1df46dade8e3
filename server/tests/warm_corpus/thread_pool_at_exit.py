# warm corpus: a ThreadPoolExecutor's pending work finishes before the interpreter exits
import time
from concurrent.futures import ThreadPoolExecutor

pool = ThreadPoolExecutor(1)
for i in range(3):
    pool.submit(lambda i=i: (time.sleep(0.1), print("task", i, "done")))
print("the script's last line")
