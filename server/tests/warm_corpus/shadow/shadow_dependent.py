# warm corpus: a stdlib module that imports one the project shadows gets the project's (asyncio imports logging)
try:
    import asyncio

    print("asyncio imported", asyncio.get_event_loop_policy is not None)
except Exception as e:
    print(type(e).__name__, e)
import logging  # noqa: E402

print(getattr(logging, "SOURCE", "stdlib logging"))
