"""Run inline code (`run_python_code`) with the official Python MCP SDK.

Usage:
  python_sdk_inline.py --mode legacy|auto --http URL --token T

Lists the tools, runs code with args, stdin and a project folder, code that raises, and code
over the server's size cap; lists the project's packages (`list_packages`, always offered); asks
install_packages for a smuggled option; then a Python session's round trip (start in a project, a
variable set by one exec and read by the next, stop). Prints a JSON report for the Rust test; it
asserts nothing itself.
"""

import argparse
import asyncio
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from common import call_report, recording_http_client, print_report

CODE = """
import sys
from geometry import *  # the project's own module: imports look in the project first
print("argv", sys.argv[1:])
print("stdin", sys.stdin.read().strip())
print("cwd has geometry.py", __import__("os").path.exists("geometry.py"))
"""


async def main(opts):
    async def session():
        headers = {"Authorization": f"Bearer {opts.token}"}
        target = streamable_http_client(
            opts.http, http_client=recording_http_client(headers=headers)
        )
        async with Client(target, mode=opts.mode, read_timeout_seconds=60) as client:
            listed = await client.list_tools()
            tools = listed if isinstance(listed, list) else listed.tools
            calls = {
                "project": ("run_python_code", {
                    "code": CODE, "project": "mathpkg", "args": ["x", "y z"], "stdin": "fed",
                }),
                "traceback": ("run_python_code", {"code": "a = 1\nraise ValueError('bad')\n"}),
                "oversized": ("run_python_code", {"code": "#" * 1200}),
                # install_packages (--allow-install): a smuggled option is refused before
                # anything runs (the server's index is a closed port: nothing may reach it).
                "install_refused": ("install_packages", {
                    "project": "mathpkg", "packages": ["--index-url=http://127.0.0.1:1/simple"],
                }),
                "packages": ("list_packages", {"project": "mathpkg"}),
                "packages_escape": ("list_packages", {"project": "../.."}),
            }
            report = {"mode": opts.mode, "tools": sorted(t.name for t in tools), "calls": {}}
            for key, (tool, args) in calls.items():
                report["calls"][key] = call_report(await client.call_tool(tool, args))
            started = call_report(await client.call_tool("session_start", {"project": "mathpkg"}))
            report["calls"]["session_start"] = started
            session_id = (started["structured"] or {}).get("session_id")
            if session_id:
                for key, code in (("session_set", "import geometry\nx = 6"), ("session_get", "x * 7")):
                    args = {"session_id": session_id, "code": code}
                    report["calls"][key] = call_report(await client.call_tool("session_exec", args))
                args = {"session_id": session_id}
                report["calls"]["session_stop"] = call_report(await client.call_tool("session_stop", args))
            return report

    await print_report(session, False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["legacy", "auto"], required=True)
    parser.add_argument("--http", required=True)
    parser.add_argument("--token", required=True)
    asyncio.run(main(parser.parse_args()))
    sys.exit(0)
