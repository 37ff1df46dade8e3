"""Drive pyrun-mcp with the official Python MCP SDK (`mcp`) and print what it saw as JSON.

Usage:
  python_sdk.py --mode legacy|auto --stdio PROGRAM [ARG ...]
  python_sdk.py --mode legacy|auto --http URL [--token T] [--expect-failure]
  python_sdk.py --mode legacy|auto --sse URL [--token T] [--expect-failure]

The Rust test asserts on the report; this script only talks to the server.
"""

import argparse
import asyncio
import sys

from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from common import print_report, recording_http_client, run_session


def transport(opts):
    headers = {"Authorization": f"Bearer {opts.token}"} if opts.token else None
    if opts.stdio:
        program, *args = opts.stdio
        return StdioServerParameters(command=program, args=args)
    if opts.http:
        return streamable_http_client(opts.http, http_client=recording_http_client(headers=headers))
    return sse_client(opts.sse, headers=headers, httpx_client_factory=recording_http_client)


async def main(opts):
    async def session():
        async with Client(transport(opts), mode=opts.mode, read_timeout_seconds=60) as client:
            return await run_session(client, opts.mode)

    await print_report(session, opts.expect_failure)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["legacy", "auto"], required=True)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--stdio", nargs=argparse.REMAINDER)
    where.add_argument("--http")
    where.add_argument("--sse")
    parser.add_argument("--token")
    parser.add_argument("--expect-failure", action="store_true")
    asyncio.run(main(parser.parse_args()))
    sys.exit(0)
