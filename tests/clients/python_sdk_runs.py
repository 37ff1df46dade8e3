"""Follow a background run with the official Python MCP SDK and read back what it drew.

Usage:
  python_sdk_runs.py --mode legacy|auto --http URL --token T --file plot_demo.py

Starts FILE with start_python, polls get_run (long waits, offsets) until it ends, decodes the
image content of the result and reads each artifact link with resources/read. Prints a JSON
report for the Rust test; it asserts nothing itself.
"""

import argparse
import asyncio
import base64
import struct
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from common import recording_http_client, print_report


def structured(result):
    """A result's structured content (`structured_content` in mcp 2.x, `structuredContent` before)."""
    value = getattr(result, "structured_content", None)
    return value if value is not None else getattr(result, "structuredContent", None)


def mime_of(item):
    value = getattr(item, "mime_type", None)
    return value if value is not None else getattr(item, "mimeType", None)


def png_facts(data):
    """Whether `data` is a PNG, and its width and height from the IHDR chunk."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return {"png": False, "size": len(data)}
    width, height = struct.unpack(">II", data[16:24])
    return {"png": True, "width": width, "height": height, "size": len(data)}


async def follow(client, file):
    started = await client.call_tool("start_python", {"file_name": file})
    run_id = structured(started)["run_id"]
    out = err = 0
    stdout = ""
    polls = 0
    while True:
        polls += 1
        state = await client.call_tool(
            "get_run",
            {"run_id": run_id, "wait_seconds": 20, "stdout_offset": out, "stderr_offset": err},
        )
        s = structured(state)
        stdout += s["stdout"]
        out, err = s["next_stdout_offset"], s["next_stderr_offset"]
        if s["status"] not in ("queued", "running") or polls > 60:
            return run_id, stdout, state, polls


async def main(opts):
    async def session():
        headers = {"Authorization": f"Bearer {opts.token}"}
        target = streamable_http_client(
            opts.http, http_client=recording_http_client(headers=headers)
        )
        async with Client(target, mode=opts.mode, read_timeout_seconds=60) as client:
            run_id, stdout, state, polls = await follow(client, opts.file)
            s = structured(state)
            images = [
                png_facts(base64.b64decode(block.data))
                for block in state.content
                if getattr(block, "type", "") == "image"
            ]
            links = [str(block.uri) for block in state.content if getattr(block, "type", "") == "resource_link"]
            read_back = []
            for uri in links:
                contents = (await client.read_resource(uri)).contents
                for item in contents:
                    blob = getattr(item, "blob", None)
                    data = base64.b64decode(blob) if blob is not None else item.text.encode()
                    read_back.append({"uri": str(item.uri), "mime": mime_of(item), **png_facts(data)})
            listed = await client.call_tool("list_runs", {})
            return {
                "mode": opts.mode,
                "run_id": run_id,
                "status": s["status"],
                "exit_code": s["exit_code"],
                "stdout": stdout,
                "polls": polls,
                "artifacts": s["artifacts"],
                "images": images,
                "links": links,
                "read_back": read_back,
                "listed": [r["run_id"] for r in structured(listed)["runs"]],
            }

    await print_report(session, False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["legacy", "auto"], required=True)
    parser.add_argument("--http", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--file", required=True)
    asyncio.run(main(parser.parse_args()))
    sys.exit(0)
