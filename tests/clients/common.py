"""What every client script does with a connected client, and how it reports it (shared)."""

import json

from mcp.shared._httpx_utils import create_mcp_http_client

# Every HTTP status the client's requests got, in order (reported so tests can see a 401).
STATUSES = []


async def _record_status(response):
    STATUSES.append(response.status_code)


def recording_http_client(headers=None, timeout=None, auth=None, **_ignored):
    """The SDK's own HTTP client, plus a hook noting each response's status in STATUSES."""
    client = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
    client.event_hooks["response"].append(_record_status)
    return client

# The calls every client makes, by report key: (tool, arguments).
CALLS = {
    "hello": ("run_python", {"file_name": "hello_world.py"}),
    "calculator": ("run_python", {"file_name": "calculator.py"}),
    "error": ("run_python", {"file_name": "error_test.py"}),
    "escape": ("run_python", {"file_name": "../outside.py"}),
    "list": ("list_python_files", {}),
}


def call_report(result):
    """The parts of a CallToolResult the tests look at (works for mcp and fastmcp results)."""
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    is_error = getattr(result, "isError", None)
    if is_error is None:
        is_error = getattr(result, "is_error", False)
    structured = getattr(result, "structuredContent", None)
    if structured is None:
        structured = getattr(result, "structured_content", None)
    return {"is_error": bool(is_error), "text": text, "structured": structured}


async def run_session(client, mode, call=None):
    """List the tools and make every call in CALLS; `call(name, args)` defaults to client.call_tool."""
    call = call or client.call_tool
    listed = await client.list_tools()
    tools = listed if isinstance(listed, list) else listed.tools
    report = {"mode": mode, "tools": sorted(tool.name for tool in tools), "calls": {}}
    version = getattr(client, "protocol_version", None)
    if isinstance(version, str):
        report["protocol_version"] = version
    for key, (tool, args) in CALLS.items():
        report["calls"][key] = call_report(await call(tool, args))
    return report


async def print_report(session, expect_failure):
    """Print the report of `session()` (a coroutine function returning one) as JSON, with the
    HTTP statuses seen; with `expect_failure`, a failure is reported instead of raised."""
    try:
        report = await session()
    except BaseException as exc:  # noqa: BLE001 - the report carries it to the Rust test
        if not expect_failure:
            raise
        report = {"error": error_text(exc)}
    report["http_statuses"] = STATUSES
    print(json.dumps(report))


def error_text(exc):
    """An exception and everything inside it (exception groups, causes) as one string."""
    parts = [f"{type(exc).__name__}: {exc}"]
    for inner in getattr(exc, "exceptions", ()) or ():
        parts.append(error_text(inner))
    if exc.__cause__ is not None:
        parts.append(error_text(exc.__cause__))
    return " | ".join(parts)
