# warm corpus: asyncio.run with tasks, a subprocess and the default policy
import asyncio
import sys


async def child():
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "print('from the child')",
                                                stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    return out.decode().strip(), proc.returncode


async def main():
    results = await asyncio.gather(*(asyncio.sleep(0.01, result=i) for i in range(5)))
    print(results)
    print(await child())
    loop = asyncio.get_running_loop()
    print(type(loop).__name__, loop.get_debug())
    print(len(asyncio.all_tasks()))


print(type(asyncio.get_event_loop_policy()).__name__)
asyncio.run(main())
try:
    asyncio.get_running_loop()
except RuntimeError as e:
    print("RuntimeError", e)
