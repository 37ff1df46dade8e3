"""What a run's result holds, seen through the official Python MCP SDK: pictures sized for a
model, table previews, and a long output as its head and tail.

Usage:
  python_sdk_results.py --mode legacy|auto --http URL --token T --original PLOT.png

Runs leave_plot.py (copies PLOT.png, 6000x3000, into its output folder), tables.py (a CSV and
a JSON file) and loud.py (prints 50 MB) with run_python; reads the plot's link, the long
output's link and a get_run page from the cut's offset. Prints a JSON report for the Rust test;
it asserts nothing itself.
"""

import argparse
import asyncio
import base64
import json
import struct
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from common import call_report, recording_http_client, print_report


def png_facts(data):
    """Whether `data` is a PNG, and its width and height from the IHDR chunk."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return {"png": False, "size": len(data)}
    width, height = struct.unpack(">II", data[16:24])
    return {"png": True, "width": width, "height": height, "size": len(data)}


def blocks(result, kind):
    return [block for block in result.content if getattr(block, "type", "") == kind]


async def read_bytes(client, uri):
    item = (await client.read_resource(uri)).contents[0]
    blob = getattr(item, "blob", None)
    return base64.b64decode(blob) if blob is not None else item.text.encode()


async def main(opts):
    with open(opts.original, "rb") as f:
        original = f.read()

    async def session():
        headers = {"Authorization": f"Bearer {opts.token}"}
        target = streamable_http_client(
            opts.http, http_client=recording_http_client(headers=headers)
        )
        async with Client(target, mode=opts.mode, read_timeout_seconds=120) as client:
            plot = await client.call_tool("run_python", {"file_name": "leave_plot.py"})
            images = [
                {"mime": block.mimeType if hasattr(block, "mimeType") else block.mime_type,
                 "base64_bytes": len(block.data),
                 **png_facts(base64.b64decode(block.data))}
                for block in blocks(plot, "image")
            ]
            link = str(blocks(plot, "resource_link")[0].uri)
            linked = await read_bytes(client, link)

            tables = call_report(await client.call_tool("run_python", {"file_name": "tables.py"}))

            loud = await client.call_tool("run_python", {"file_name": "loud.py"})
            loud_report = call_report(loud)
            cut = loud_report["structured"].get("stdout_cut") or {}
            whole = await read_bytes(client, cut["uri"]) if cut.get("uri") else b""
            page = {}
            if cut.get("run_id"):
                page = call_report(await client.call_tool(
                    "get_run", {"run_id": cut["run_id"], "stdout_offset": cut["head_bytes"]}))
            return {
                "mode": opts.mode,
                "plot": {
                    "text": call_report(plot)["text"],
                    "images": images,
                    "link_same_bytes": linked == original,
                    "link_size": len(linked),
                },
                "tables": tables,
                "loud": {
                    "text_bytes": len(loud_report["text"].encode()),
                    "structured_bytes": len(json.dumps(loud_report["structured"])),
                    "text_head": loud_report["text"][:200],
                    "text_tail": loud_report["text"][-300:],
                    "text": loud_report["text"] if len(loud_report["text"]) < 200_000 else "",
                    "stdout_cut": cut,
                    "whole_bytes": len(whole),
                    "whole_head": whole[:40].decode(errors="replace"),
                    "page_head": (page.get("structured") or {}).get("stdout", "")[:40],
                    "page_matches": (page.get("structured") or {}).get("stdout", "")[:1000]
                    == whole[cut.get("head_bytes", 0):cut.get("head_bytes", 0) + 1000].decode(errors="replace"),
                },
            }

    await print_report(session, False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["legacy", "auto"], required=True)
    parser.add_argument("--http", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--original", required=True)
    asyncio.run(main(parser.parse_args()))
    sys.exit(0)
