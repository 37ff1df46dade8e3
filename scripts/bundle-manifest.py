"""Writes the MCP Bundle manifest of pyrun-mcp to OUT (used by bundle.sh and bundle.ps1).

Usage: bundle-manifest.py VERSION OS TOOLS_JSON OUT
  OS: linux, darwin or win32; TOOLS_JSON: the server's tools/list, as `pyrun-mcp-client --json tools`
  prints it, so the bundle lists exactly the tools of the binary it carries.

Claude Desktop starts the server over stdio as `mcp_config` says, after replacing `${__dirname}`
(the unpacked bundle) and `${user_config.KEY}` (what the user chose). Settings travel as
environment variables, never as a command line: an optional one left blank arrives as an empty
variable, which the server reads as unset.
"""

import json
import sys


def manifest(version, os_name, tools):
    exe = "pyrun-mcp-server.exe" if os_name == "win32" else "pyrun-mcp-server"
    return {
        "manifest_version": "0.3",
        "name": "pyrun-mcp",
        "display_name": "pyrun-mcp: run Python files",
        "version": version,
        "description": "Runs the Python files of one projects folder, in a sandbox, for Claude.",
        "long_description": (
            "Lets Claude list and run the .py files of a folder you choose. Every run is "
            "confined (Linux: Landlock, seccomp, namespaces; macOS: resource limits; Windows: "
            "a Job Object), limited in time, memory and output, and killed with all its "
            "processes when it ends. The binary is not signed."
        ),
        "author": {"name": "pyrun-mcp developers"},
        "license": "MIT",
        "icon": "icon.png",
        "keywords": ["python", "sandbox", "scripts"],
        "server": {
            "type": "binary",
            "entry_point": f"server/{exe}",
            "mcp_config": {
                "command": "${__dirname}/server/" + exe,
                "args": ["--transport", "stdio"],
                "env": {
                    "PYTHON_PROJECTS_DIR": "${user_config.projects_dir}",
                    "PYTHON_TIMEOUT": "${user_config.timeout}",
                    "PYTHON_BIN": "${user_config.python}",
                },
            },
        },
        "tools": [
            {"name": tool["name"], "description": tool.get("description", "")}
            for tool in tools
        ],
        "compatibility": {"platforms": [os_name]},
        "user_config": {
            "projects_dir": {
                "type": "directory",
                "title": "Projects folder",
                "description": "The folder whose .py files Claude may run; nothing outside it can run.",
                "required": True,
            },
            "timeout": {
                "type": "number",
                "title": "Timeout (seconds)",
                "description": "Longest a run may take.",
                "default": 30,
                "min": 1,
                "max": 86400,
                "required": False,
            },
            "python": {
                "type": "file",
                "title": "Python interpreter",
                "description": (
                    "Optional. Without it the server looks for python3 on PATH and in the usual "
                    "places (/opt/homebrew/bin, /usr/local/bin, /usr/bin; the py launcher on Windows)."
                ),
                "required": False,
            },
        },
    }


def main():
    version, os_name, tools_file, out = sys.argv[1:5]
    # utf-8-sig: Windows PowerShell 5.1 writes a byte-order mark.
    with open(tools_file, encoding="utf-8-sig") as f:
        tools = json.load(f)
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        json.dump(manifest(version, os_name, tools), f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
