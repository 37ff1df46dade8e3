#!/usr/bin/env python3
"""Warm on against `--warm off`, paired in one sitting, for the patterns where warm runs could cost.

Two servers of the same binary run side by side (the default, and `--warm off`) on one copy of
the samples; every round runs each pattern on both, the order alternating round by round, so
that the machine's load falls on both alike. Patterns: back to back over stdio, /mcp and /sse
(median ms per call), 1, 4 and 16 concurrent /mcp clients (calls per second), back to back while
another run keeps both cores busy, a call every 0.5 s (how many warm), and numpy+pandas back to
back and at 0.5 s when a venv is given. Standard library only.

    python3 scripts/warm-policy-bench.py --server target/release/pyrun-mcp-server \
        [--rounds 3] [--calls 30] [--seconds 4] [--venv DIR_WITH_NUMPY_AND_PANDAS]

Prints one line per pattern and round, then the ratio warm/off per pattern: its median over
rounds and its spread (min..max).
"""

import argparse
import http.client
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

PROTOCOL = "2025-06-18"
HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.join(HERE, "..", "python_projects")
BUSY = "import multiprocessing as m, time\n\ndef spin(s):\n    end = time.time() + s\n    while time.time() < end:\n        pass\n\nif __name__ == '__main__':\n    ps = [m.Process(target=spin, args=(SECONDS,)) for _ in range(2)]\n    [p.start() for p in ps]\n    [p.join() for p in ps]\n"
NP = 'import numpy, pandas\n\ndf = pandas.DataFrame({"x": numpy.arange(1000)})\nprint(int(df["x"].sum()))\n'


def init_msg(i):
    return {"jsonrpc": "2.0", "id": i, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {},
        "clientInfo": {"name": "warm-policy-bench", "version": "1"}}}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call_msg(i, file):
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "run_python", "arguments": {"file_name": file, "timeout_seconds": 120}}}


def check(reply):
    result = reply.get("result") or {}
    if result.get("isError"):
        raise RuntimeError("call failed: %s" % json.dumps(reply)[:400])
    return bool((result.get("structuredContent") or {}).get("warm"))


def server_cmd(binary, projects, state, transport, warm):
    cmd = [binary, "--transport", transport, "--projects-dir", projects, "--state-dir", state]
    if transport == "http":
        cmd += ["--bind", "127.0.0.1:0"]
    if not warm:
        cmd += ["--warm", "off"]
    return cmd


def clean_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYRUN_")}
    env["PYRUN_LOG"] = "info"
    return env


def stop_server(proc, state):
    """Ends a server (SIGTERM, then SIGKILL after 10 s) and removes its state folder."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    shutil.rmtree(state, ignore_errors=True)


class Stdio:
    def __init__(self, binary, projects, warm):
        self.state = tempfile.mkdtemp(prefix="wpb-state-")
        self.proc = subprocess.Popen(server_cmd(binary, projects, self.state, "stdio", warm),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=clean_env(), cwd=projects)
        self.next = 1
        self.request(init_msg(0))
        self.send(INITIALIZED)

    def send(self, msg):
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, msg):
        self.send(msg)
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("stdio server closed")
            reply = json.loads(line)
            if reply.get("id") == msg["id"]:
                return reply

    def call(self, file):
        self.next += 1
        return check(self.request(call_msg(self.next, file)))

    def close(self):
        stop_server(self.proc, self.state)


class Http:
    def __init__(self, binary, projects, warm):
        self.state = tempfile.mkdtemp(prefix="wpb-state-")
        self.proc = subprocess.Popen(server_cmd(binary, projects, self.state, "http", warm),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=clean_env(), cwd=projects)
        found = queue.Queue()

        def read():
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace")
                if "listening on " in line:
                    found.put(line.split("listening on ")[1].strip().rstrip("/"))
        threading.Thread(target=read, daemon=True).start()
        url = found.get(timeout=30)
        hostport = url.split("://", 1)[1].split("/", 1)[0]
        self.host, port = hostport.rsplit(":", 1)
        self.port = int(port)

    def close(self):
        stop_server(self.proc, self.state)


class McpClient:
    def __init__(self, server):
        self.conn = http.client.HTTPConnection(server.host, server.port, timeout=300)
        self.session = None
        self.next = 1
        self.request(init_msg(0))
        self.post(INITIALIZED).read()

    def post(self, msg):
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
            headers["MCP-Protocol-Version"] = PROTOCOL
        self.conn.request("POST", "/mcp", body=json.dumps(msg), headers=headers)
        resp = self.conn.getresponse()
        if resp.getheader("mcp-session-id"):
            self.session = resp.getheader("mcp-session-id")
        return resp

    def request(self, msg):
        resp = self.post(msg)
        body = resp.read().decode()
        if resp.status >= 400 or not body.strip():
            raise RuntimeError("HTTP %d from /mcp: %r" % (resp.status, body[:300]))
        if resp.getheader("content-type", "").startswith("text/event-stream"):
            for line in body.splitlines():
                if line.startswith("data:") and line[5:].strip():
                    reply = json.loads(line[5:])
                    if reply.get("id") == msg["id"]:
                        return reply
            raise RuntimeError("no reply in %r" % body[:300])
        return json.loads(body)

    def call(self, file):
        self.next += 1
        return check(self.request(call_msg(self.next, file)))

    def close(self):
        self.conn.close()


class SseClient:
    """Legacy SSE: GET /sse names the endpoint to POST to; replies come on the stream."""

    def __init__(self, server):
        self.server = server
        self.stream = http.client.HTTPConnection(server.host, server.port, timeout=300)
        self.stream.request("GET", "/sse", headers={"Accept": "text/event-stream"})
        self.resp = self.stream.getresponse()
        self.replies = queue.Queue()
        self.endpoint = queue.Queue()
        threading.Thread(target=self.read, daemon=True).start()
        self.path = self.endpoint.get(timeout=30)
        self.posts = http.client.HTTPConnection(server.host, server.port, timeout=300)
        self.next = 1
        self.request(init_msg(0))
        self.post(INITIALIZED)

    def read(self):
        event = None
        while True:
            try:
                line = self.resp.fp.readline()
            except (AttributeError, OSError, ValueError):
                return  # closed
            if not line:
                return
            line = line.decode().rstrip("\r\n")
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data = line[5:].strip()
                if event == "endpoint":
                    self.endpoint.put(data)
                else:
                    self.replies.put(json.loads(data))
            elif not line:
                event = None

    def post(self, msg):
        self.posts.request("POST", self.path, body=json.dumps(msg),
                           headers={"Content-Type": "application/json"})
        self.posts.getresponse().read()

    def request(self, msg):
        self.post(msg)
        while True:
            reply = self.replies.get(timeout=300)
            if reply.get("id") == msg["id"]:
                return reply

    def call(self, file):
        self.next += 1
        return check(self.request(call_msg(self.next, file)))

    def close(self):
        self.stream.close()
        self.posts.close()


def back_to_back(client, file, n):
    times, warm = [], 0
    for _ in range(n):
        t = time.perf_counter()
        warm += client.call(file)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), warm


def paced(client, file, n, every):
    times, warm = [], 0
    for _ in range(n):
        time.sleep(every)
        t = time.perf_counter()
        warm += client.call(file)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), warm


def concurrent(server, file, clients, seconds):
    made = [McpClient(server) for _ in range(clients)]
    counts, warms = [0] * clients, [0] * clients
    start = threading.Barrier(clients + 1)
    until = [0.0]

    def loop(i):
        start.wait()
        while time.perf_counter() < until[0]:
            warms[i] += made[i].call(file)
            counts[i] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(clients)]
    [t.start() for t in threads]
    until[0] = time.perf_counter() + seconds
    began = time.perf_counter()
    start.wait()
    [t.join() for t in threads]
    took = time.perf_counter() - began
    [c.close() for c in made]
    return sum(counts) / took, sum(warms)


def while_busy(server, file, n):
    """Back to back /mcp calls while another client's run keeps both cores busy."""
    busy, client = McpClient(server), McpClient(server)
    done = threading.Event()
    threading.Thread(target=lambda: (busy.call("busy.py"), done.set()), daemon=True).start()
    time.sleep(0.3)
    result = back_to_back(client, file, n)
    if done.is_set():
        print("  (the busy run ended before the calls did: raise SECONDS in busy.py)", file=sys.stderr)
    done.wait()
    busy.close()
    client.close()
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--venv", help="a venv with numpy and pandas (copied as the np folder's .venv)")
    ap.add_argument("--only", help="comma-separated pattern names")
    args = ap.parse_args()
    binary = os.path.abspath(args.server)
    projects = tempfile.mkdtemp(prefix="wpb-projects-")
    shutil.copytree(SAMPLES, projects, dirs_exist_ok=True)
    with open(os.path.join(projects, "busy.py"), "w") as f:
        f.write(BUSY.replace("SECONDS", str(max(3.0, args.calls * 0.15))))
    if args.venv:
        os.makedirs(os.path.join(projects, "np"))
        with open(os.path.join(projects, "np", "np_pandas.py"), "w") as f:
            f.write(NP)
        subprocess.run(["cp", "-a", args.venv, os.path.join(projects, "np", ".venv")], check=True)

    n, secs = args.calls, args.seconds
    patterns = [
        ("stdio b2b ms", "stdio", lambda c, s: back_to_back(c, "hello_world.py", n)),
        ("mcp b2b ms", "mcp", lambda c, s: back_to_back(c, "hello_world.py", n)),
        ("sse b2b ms", "sse", lambda c, s: back_to_back(c, "hello_world.py", n)),
        ("mcp x1 calls/s", None, lambda c, s: concurrent(s, "hello_world.py", 1, secs)),
        ("mcp x4 calls/s", None, lambda c, s: concurrent(s, "hello_world.py", 4, secs)),
        ("mcp x16 calls/s", None, lambda c, s: concurrent(s, "hello_world.py", 16, secs)),
        ("busy b2b ms", None, lambda c, s: while_busy(s, "hello_world.py", n)),
        ("stdio 0.5s ms", "stdio", lambda c, s: paced(c, "hello_world.py", max(10, n // 3), 0.5)),
    ]
    if args.venv:
        patterns += [
            ("np stdio b2b ms", "stdio", lambda c, s: back_to_back(c, "np/np_pandas.py", max(10, n // 3))),
            ("np stdio 0.5s ms", "stdio", lambda c, s: paced(c, "np/np_pandas.py", 10, 0.5)),
            ("np mcp x4 calls/s", None, lambda c, s: concurrent(s, "np/np_pandas.py", 4, secs * 2)),
        ]
    if args.only:
        wanted = set(args.only.split(","))
        patterns = [p for p in patterns if p[0] in wanted]

    servers = {}
    for warm in (True, False):
        servers[warm] = {"stdio": Stdio(binary, projects, warm), "http": Http(binary, projects, warm)}
    ratios = {name: [] for name, _, _ in patterns}
    print("load before: %s" % open("/proc/loadavg").read().strip())
    for r in range(args.rounds):
        order = (True, False) if r % 2 == 0 else (False, True)
        for name, kind, run in patterns:
            got = {}
            for warm in order:
                s = servers[warm]
                client, owned = None, False
                if kind == "stdio":
                    client = s["stdio"]
                elif kind == "mcp":
                    client, owned = McpClient(s["http"]), True
                elif kind == "sse":
                    client, owned = SseClient(s["http"]), True
                # One call first: the first run of a kind teaches its preload.
                if client is not None:
                    client.call("hello_world.py" if "np" not in name else "np/np_pandas.py")
                    time.sleep(1.0)
                value, warm_count = run(client, s["http"])
                if owned:
                    client.close()
                got[warm] = (value, warm_count)
                time.sleep(0.5)
            on, off = got[True][0], got[False][0]
            ratio = on / off if name.endswith("ms") else off / on
            ratios[name].append(ratio)
            print("round %d  %-18s warm %8.2f (%3d warm)  off %8.2f  cost ratio %.3f  load %s" % (
                r + 1, name, on, got[True][1], off, ratio, open("/proc/loadavg").read().split()[0]),
                flush=True)
    print("\ncost ratio warm/off (time per call; > 1 = warm slower): median [min..max] over rounds")
    for name, values in ratios.items():
        if values:
            print("  %-18s %.3f [%.3f..%.3f]" % (name, statistics.median(values), min(values), max(values)))
    print("load after: %s" % open("/proc/loadavg").read().strip())
    for s in servers.values():
        for v in s.values():
            v.close()
    shutil.rmtree(projects, ignore_errors=True)


if __name__ == "__main__":
    main()
