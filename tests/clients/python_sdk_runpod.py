"""Drive runs on the RunPod backend with the official Python MCP SDK.

Usage:
  python_sdk_runpod.py --http URL --token T --steps JSON

STEPS is a list; each step is one of
  {"call": TOOL, "args": {...}}          a tool call, reported as it came back
  {"follow": {...start_python args}}     start_python, then get_run by offsets until it ends
  {"cancel": {...start_python args}}     start_python, get_run until it printed, cancel_run
  {"detach": {...run_python args}}       run_python (handed over by --detach-after), cancel_run
Prints a JSON report for the Rust test (the timings of each step included); asserts nothing.
"""

import argparse
import asyncio
import json
import sys
import time

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from common import call_report, recording_http_client, print_report


async def follow(client, args, stop_at_output=False):
    t0 = time.monotonic()
    started = call_report(await client.call_tool("start_python", args))
    if started["is_error"]:
        return {"started": started}
    run_id = started["structured"]["run_id"]
    out = err = 0
    stdout, stderr, statuses, first_output = "", "", [], None
    for _ in range(120):
        state = call_report(await client.call_tool(
            "get_run",
            {"run_id": run_id, "wait_seconds": 10, "stdout_offset": out, "stderr_offset": err},
        ))
        s = state["structured"]
        statuses.append(s["status"])
        if s["stdout"] and first_output is None:
            first_output = time.monotonic() - t0
        stdout += s["stdout"]
        stderr += s["stderr"]
        out, err = s["next_stdout_offset"], s["next_stderr_offset"]
        if stop_at_output and stdout:
            break
        if s["status"] not in ("queued", "running"):
            break
    return {
        "run_id": run_id,
        "stdout": stdout,
        "stderr": stderr,
        "statuses": statuses,
        "last": state,
        "first_output_s": first_output,
        "total_s": time.monotonic() - t0,
    }


async def main(opts):
    steps = json.loads(opts.steps)

    async def session():
        headers = {"Authorization": f"Bearer {opts.token}"}
        target = streamable_http_client(opts.http, http_client=recording_http_client(headers=headers))
        report = {"steps": []}
        async with Client(target, mode="legacy", read_timeout_seconds=120) as client:
            listed = await client.list_tools()
            tools = listed if isinstance(listed, list) else listed.tools
            report["tools"] = {t.name: t.inputSchema if hasattr(t, "inputSchema") else t.input_schema for t in tools}
            for step in steps:
                t0 = time.monotonic()
                if "call" in step:
                    done = call_report(await client.call_tool(step["call"], step.get("args", {})))
                elif "detach" in step:
                    handed = call_report(await client.call_tool("run_python", step["detach"]))
                    run_id = (handed["structured"] or {}).get("run_id")
                    cancelled = (
                        call_report(await client.call_tool("cancel_run", {"run_id": run_id}))
                        if run_id else None
                    )
                    done = {"handed": handed, "cancelled": cancelled}
                elif "follow" in step:
                    done = await follow(client, step["follow"])
                else:
                    followed = await follow(client, step["cancel"], stop_at_output=True)
                    cancelled = call_report(
                        await client.call_tool("cancel_run", {"run_id": followed["run_id"]})
                    )
                    done = {**followed, "cancelled": cancelled}
                done["seconds"] = time.monotonic() - t0
                report["steps"].append(done)
        return report

    await print_report(session, False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--steps", required=True)
    asyncio.run(main(parser.parse_args()))
    sys.exit(0)
