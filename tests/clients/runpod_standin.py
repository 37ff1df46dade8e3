"""A stand-in of RunPod's serverless cloud API on loopback, for what the SDK's local test server
does not mimic: routes under /v2/{endpoint}/, status and stream by GET, a stream that hands out
output while the job runs, /cancel/{id} and /health. Answers follow RunPod's documented shapes
(docs.runpod.io, "Send requests to an endpoint": run, status, stream, cancel, health).

Usage: runpod_standin.py PORT   (requests are logged as JSON lines to $PYRUN_STANDIN_LOG)

A job prints "tick N" every 0.2 s on its stream until cancelled; nothing actually runs. The first
`/run` is answered 503 (a transient failure the client must retry), and a job whose script is
named `lost.py` fails as RunPod reports a job its worker lost.
"""

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = os.environ.get("PYRUN_STANDIN_LOG")
JOBS = {}
LOCK = threading.Lock()
SUBMITS = []


def record(handler, body):
    if LOG:
        with LOCK, open(LOG, "a") as f:
            f.write(json.dumps({
                "method": handler.command,
                "path": handler.path,
                "authorization": handler.headers.get("Authorization"),
                "body_keys": sorted(body) if isinstance(body, dict) else None,
            }) + "\n")


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def route(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        record(self, body)
        parts = self.path.strip("/").split("/")
        if len(parts) < 3 or parts[0] != "v2":
            return self.answer(404, {"error": "not found"})
        if self.headers.get("Authorization") != "Bearer " + os.environ.get("STANDIN_KEY", ""):
            return self.answer(401, {"error": "Unauthorized"})
        action, rest = parts[2], parts[3:]
        if action == "health" and self.command == "GET":
            with LOCK:
                running = sum(1 for j in JOBS.values() if j["status"] == "IN_PROGRESS")
            return self.answer(200, {
                "jobs": {"completed": 0, "failed": 0, "inProgress": running, "inQueue": 0, "retried": 0},
                "workers": {"idle": 1, "running": running, "throttled": 0},
            })
        if action == "run" and self.command == "POST":
            SUBMITS.append(1)
            if len(SUBMITS) == 1:
                return self.answer(503, {"error": "no capacity right now"})
            job_id = f"standin-{len(JOBS) + 1}"
            lost = str((body or {}).get("input", {}).get("script", "")).endswith("lost.py")
            with LOCK:
                JOBS[job_id] = {"status": "IN_QUEUE", "started": time.monotonic(), "sent": 0, "lost": lost}
            return self.answer(200, {"id": job_id, "status": "IN_QUEUE"})
        job = JOBS.get(rest[0]) if rest else None
        if job is None:
            return self.answer(404, {"error": "job not found"})
        if action == "cancel" and self.command == "POST":
            job["status"] = "CANCELLED"
            return self.answer(200, {"id": rest[0], "status": "CANCELLED"})
        if action in ("stream", "status") and self.command == "GET":
            if job["status"] == "IN_QUEUE":
                job["status"] = "IN_PROGRESS"
            if job["lost"]:
                return self.answer(200, {"id": rest[0], "status": "FAILED", "error": "worker exited unexpectedly (job lost)"})
            if action == "status":
                return self.answer(200, {"id": rest[0], "status": job["status"]})
            ticks = int((time.monotonic() - job["started"]) / 0.2)
            stream = []
            if job["status"] == "IN_PROGRESS":
                while job["sent"] < ticks:
                    job["sent"] += 1
                    stream.append({"output": {"stdout": f"tick {job['sent']}\n"}})
            return self.answer(200, {"status": job["status"], "stream": stream})
        return self.answer(405, {"error": "method not allowed"})

    do_GET = route
    do_POST = route


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
