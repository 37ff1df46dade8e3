"""Read pyrun-mcp's resources and prompts with the official Python MCP SDK (`mcp`); print what it saw
as JSON.

Usage:
  python_sdk_resources.py --mode legacy|auto --stdio PROGRAM [ARG ...]
  python_sdk_resources.py --mode legacy|auto --http URL [--token T]

The Rust test asserts on the report; this script only talks to the server.
"""

import argparse
import asyncio
import sys

from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from common import error_text, print_report, recording_http_client


def transport(opts):
    headers = {"Authorization": f"Bearer {opts.token}"} if opts.token else None
    if opts.stdio:
        program, *args = opts.stdio
        return StdioServerParameters(command=program, args=args)
    return streamable_http_client(opts.http, http_client=recording_http_client(headers=headers))


def dump(value):
    """A pydantic result as the JSON the server sent (camelCase keys)."""
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


async def attempt(coroutine):
    """The result as JSON, or the error the SDK raised."""
    try:
        return {"ok": dump(await coroutine)}
    except Exception as exc:  # noqa: BLE001 - reported to the Rust test
        return {"error": error_text(exc)}


async def run(client, mode):
    report = {"mode": mode}
    version = getattr(client, "protocol_version", None)
    if isinstance(version, str):
        report["protocol_version"] = version
    report["resources"] = await attempt(client.list_resources())
    report["templates"] = await attempt(client.list_resource_templates())
    report["read"] = await attempt(client.read_resource("pyrun://projects/hello_world.py"))
    report["read_escape"] = await attempt(client.read_resource("pyrun://projects/../outside.py"))
    report["read_env"] = await attempt(client.read_resource("pyrun://projects/.env"))
    report["prompts"] = await attempt(client.list_prompts())
    report["prompt"] = await attempt(
        client.get_prompt("run-and-explain", {"file": "hello_world.py"})
    )
    report["prompt_escape"] = await attempt(
        client.get_prompt("debug-script", {"file": "../outside.py"})
    )
    return report


async def main(opts):
    async def session():
        async with Client(transport(opts), mode=opts.mode, read_timeout_seconds=60) as client:
            return await run(client, opts.mode)

    await print_report(session, False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["legacy", "auto"], required=True)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--stdio", nargs=argparse.REMAINDER)
    where.add_argument("--http")
    parser.add_argument("--token")
    asyncio.run(main(parser.parse_args()))
    sys.exit(0)
