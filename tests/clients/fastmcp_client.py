"""Drive pyrun-mcp with the `fastmcp` Client and print what it saw as JSON.

Usage:
  fastmcp_client.py --http URL|--sse URL [--mode auto|legacy] [--token T] [--expect-failure]

The Rust test asserts on the report; this script only talks to the server.
"""

import argparse
import asyncio

from fastmcp import Client
from fastmcp.client.transports import SSETransport, StreamableHttpTransport

from common import print_report, recording_http_client, run_session


async def main(opts):
    headers = {"Authorization": f"Bearer {opts.token}"} if opts.token else None
    if opts.http:
        transport = StreamableHttpTransport(
            opts.http, headers=headers, httpx_client_factory=recording_http_client
        )
    else:
        transport = SSETransport(opts.sse, headers=headers, httpx_client_factory=recording_http_client)

    async def session():
        async with Client(transport, mode=opts.mode, timeout=60) as client:

            async def call(tool, args):
                return await client.call_tool(tool, args, raise_on_error=False)

            return await run_session(client, opts.mode, call)

    await print_report(session, opts.expect_failure)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--http")
    where.add_argument("--sse")
    parser.add_argument("--mode", choices=["legacy", "auto"], default="auto")
    parser.add_argument("--token")
    parser.add_argument("--expect-failure", action="store_true")
    asyncio.run(main(parser.parse_args()))
