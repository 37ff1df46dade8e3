"""The whole OAuth 2.1 flow of a `--oauth` pyrun-mcp with the official Python MCP SDK's
`OAuthClientProvider`, headless, and a JSON report of what happened.

Usage:
  oauth_flow.py --mode legacy|auto (--http URL | --sse URL) --secret OWNER_SECRET
                [--cimd-cert CERT.pem --cimd-key KEY.pem]

Discovery, registration (dynamic, or a Client ID Metadata Document this script serves over https
on 127.0.0.1 with the given certificate), PKCE, the token exchange and the refresh are the SDK's.
The part a person does in a browser is done here over HTTP as a browser would: GET the consent page
(cookies kept), read the form's hidden fields, POST the owner's secret with `decision=approve`, and
hand the code from the 303's Location to the SDK. Then: `run_python`, a forced refresh (the stored
access token is marked expired, so the SDK refreshes before the next request), `run_python` again,
revocation of both tokens (RFC 7009), and a new session holding the revoked tokens, which must get
401 (the consent step refuses to run again, so the SDK cannot quietly log in anew).

The Rust test (`tests/tests/python_sdk_oauth.rs`) asserts on the report; this script only talks.
"""

import argparse
import asyncio
import http.server
import json
import ssl
import sys
import threading
import time
from html.parser import HTMLParser
from urllib.parse import parse_qs, urljoin, urlparse

import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from common import call_report, error_text

CLIENT_NAME = "pyrun SDK OAuth test"
# Never visited: the consent step reads the code from the redirect's Location instead.
REDIRECT_URI = "http://127.0.0.1:33418/callback"

# Every HTTP exchange of the SDK's client, in order: [method, path, status].
EXCHANGES = []


async def _record(response):
    EXCHANGES.append([response.request.method, response.request.url.path, response.status_code])


class MemoryStorage:
    """The SDK's TokenStorage, in memory; `tokens` and `client_info` are read by this script."""

    def __init__(self, tokens=None, client_info=None):
        self.tokens = tokens
        self.client_info = client_info

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class ConsentForm(HTMLParser):
    """The consent page's form: its action and every named input's value (hidden fields included),
    and the text of its `#error` element if it has one."""

    def __init__(self):
        super().__init__()
        self.action = None
        self.fields = {}
        self.error = None
        self._in_error = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and self.action is None:
            self.action = attrs.get("action")
        elif tag == "input" and attrs.get("name"):
            self.fields[attrs["name"]] = attrs.get("value") or ""
        if attrs.get("id") == "error":
            self.error, self._in_error = "", True

    def handle_endtag(self, tag):
        self._in_error = False

    def handle_data(self, data):
        if self._in_error:
            self.error += data


class Owner:
    """The person at the consent page, played over HTTP: `redirect_handler` and `callback_handler`
    for the SDK. With `willing` false it refuses to open the page at all."""

    def __init__(self, secret):
        self.secret = secret
        self.willing = True
        self.visits = []
        self.result = None

    async def redirect_handler(self, authorization_url):
        if not self.willing:
            raise RuntimeError("the owner is not asked again in this step")
        visit = {"authorize_params": sorted(parse_qs(urlparse(authorization_url).query))}
        self.visits.append(visit)
        # A browser: its own cookie jar, no redirects followed (the Location is the answer).
        async with httpx2.AsyncClient(timeout=30) as browser:
            page = await browser.get(authorization_url)
            visit["page_status"] = page.status_code
            visit["page_headers"] = {
                name: page.headers.get(name)
                for name in ("content-type", "x-frame-options", "content-security-policy")
            }
            visit["csrf_cookie"] = "pyrun_oauth_csrf" in browser.cookies
            form = ConsentForm()
            form.feed(page.text)
            visit["form_fields"] = sorted(form.fields)
            if page.status_code != 200 or form.action is None:
                raise RuntimeError(f"no consent form ({page.status_code}): {form.error or page.text}")
            fields = {name: value for name, value in form.fields.items() if name != "secret"}
            fields.update({"secret": self.secret, "decision": "approve"})
            answer = await browser.post(urljoin(str(page.url), form.action), data=fields)
            visit["answer_status"] = answer.status_code
            location = answer.headers.get("location", "")
            visit["location_origin"] = "{0.scheme}://{0.netloc}{0.path}".format(urlparse(location))
        params = {k: v[0] for k, v in parse_qs(urlparse(location).query).items()}
        visit["location_params"] = sorted(params)
        if answer.status_code != 303 or "code" not in params:
            raise RuntimeError(f"consent did not redirect with a code ({answer.status_code}): {location}")
        self.result = AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    async def callback_handler(self):
        result, self.result = self.result, None
        return result


class MetadataDocument:
    """A Client ID Metadata Document served over https on 127.0.0.1 (a thread), counting fetches."""

    def __init__(self, cert, key):
        self.fetches = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the stdlib's name
                if self.path != "/oauth-client.json":
                    self.send_error(404)
                    return
                outer.fetches += 1
                body = json.dumps(outer.document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}/oauth-client.json"
        self.document = {
            "client_id": self.url,
            "client_name": CLIENT_NAME,
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def provider_for(opts, owner, storage, metadata_url):
    return OAuthClientProvider(
        server_url=opts.http or opts.sse,
        client_metadata=OAuthClientMetadata(
            client_name=CLIENT_NAME,
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=owner.redirect_handler,
        callback_handler=owner.callback_handler,
        client_metadata_url=metadata_url,
    )


def recording_http_client(headers=None, timeout=None, auth=None):
    """The SDK's own HTTP client, noting every exchange in EXCHANGES."""
    client = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
    client.event_hooks["response"].append(_record)
    return client


def transport(opts, provider):
    """Streamable HTTP (`--http`) or the legacy SSE transport (`--sse`), authenticated by `provider`."""
    if opts.sse:
        return sse_client(opts.sse, auth=provider, httpx_client_factory=recording_http_client)
    return streamable_http_client(opts.http, http_client=recording_http_client(auth=provider))


async def call_hello(client):
    return call_report(await client.call_tool("run_python", {"file_name": "hello_world.py"}))


async def revoke(opts, token, hint, client_id):
    """POST /oauth/revoke (RFC 7009) as the client would; the status."""
    revoke_url = urljoin(opts.http or opts.sse, "/oauth/revoke")
    async with httpx2.AsyncClient(timeout=30) as plain:
        answer = await plain.post(
            revoke_url, data={"token": token, "token_type_hint": hint, "client_id": client_id}
        )
    return answer.status_code


async def flow(opts, report):
    owner = Owner(opts.secret)
    storage = MemoryStorage()
    document = MetadataDocument(opts.cimd_cert, opts.cimd_key) if opts.cimd_cert else None
    provider = provider_for(opts, owner, storage, document.url if document else None)

    async with Client(transport(opts, provider), mode=opts.mode, read_timeout_seconds=60) as client:
        report["protocol_version"] = getattr(client, "protocol_version", None)
        report["first_call"] = await call_hello(client)
        first = storage.tokens
        report["client_id"] = storage.client_info.client_id
        report["first_tokens"] = {"access": first.access_token, "refresh": first.refresh_token,
                                  "expires_in": first.expires_in, "scope": first.scope}
        report["exchanges_until_first_call"] = list(EXCHANGES)

        # Force a refresh: the SDK holds the token as expired and refreshes before the next request.
        provider.context.token_expiry_time = time.time() - 1
        mark = len(EXCHANGES)
        report["after_refresh_call"] = await call_hello(client)
        report["exchanges_of_refresh"] = EXCHANGES[mark:]
        second = storage.tokens
        report["refreshed_tokens"] = {"access": second.access_token, "refresh": second.refresh_token}

    report["consent_visits"] = owner.visits
    if document is not None:
        report["metadata_url"] = document.url
        report["metadata_fetches"] = document.fetches

    client_id = report["client_id"]
    report["revoke_statuses"] = [
        await revoke(opts, second.refresh_token, "refresh_token", client_id),
        await revoke(opts, second.access_token, "access_token", client_id),
    ]

    # A new session holding the revoked tokens: its first request must get 401, and since the owner
    # is not asked again, the SDK cannot get new ones.
    owner.willing = False
    revoked = MemoryStorage(tokens=second, client_info=storage.client_info)
    provider = provider_for(opts, owner, revoked, document.url if document else None)
    mark = len(EXCHANGES)
    try:
        async with Client(transport(opts, provider), mode=opts.mode, read_timeout_seconds=60) as client:
            report["after_revoke_call"] = await call_hello(client)
    except BaseException as exc:  # noqa: BLE001 - the report carries it to the Rust test
        report["after_revoke_error"] = error_text(exc)
    report["exchanges_after_revoke"] = EXCHANGES[mark:]


async def main(opts):
    report = {
        "mode": opts.mode,
        "metadata_document": bool(opts.cimd_cert),
        "client_name": CLIENT_NAME,
        "redirect_uri": REDIRECT_URI,
    }
    try:
        await flow(opts, report)
    finally:
        report["exchanges"] = EXCHANGES
        print(json.dumps(report))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["legacy", "auto"], required=True)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--http")
    where.add_argument("--sse")
    parser.add_argument("--secret", required=True)
    parser.add_argument("--cimd-cert")
    parser.add_argument("--cimd-key")
    asyncio.run(main(parser.parse_args()))
    sys.exit(0)
