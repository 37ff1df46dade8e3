// A minimal MCP Apps host for tests, on the ext-apps SDK's own host side (AppBridge,
// PostMessageTransport) and the official TypeScript client. It does what a host such as Claude
// does for a tool with `_meta.ui.resourceUri`: read the `ui://` resource, render it in a sandboxed
// iframe under the CSP its `_meta.ui.csp` asks for, call the tool, hand the app the tool's input
// and result, and forward the app's own tool calls and resource reads to the server.
// Driven by the query string: `?tool=NAME&args=JSON&theme=light|dark&reads=0` (`reads=0`: a host
// that offers the app no resource reads). `#host-status` says where
// it is ("app ready", "result sent", or "error: …").
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const UI = "io.modelcontextprotocol/ui";
const MIME = "text/html;profile=mcp-app";
const status = (text) => { document.getElementById("host-status").textContent = text; };

// The CSP a host derives from the resource's `_meta.ui.csp`: nothing from anywhere unless named.
function csp(meta) {
  const c = (meta && meta.ui && meta.ui.csp) || {};
  const list = (domains) => (domains && domains.length ? " " + domains.join(" ") : "");
  return [
    "default-src 'none'",
    "script-src 'unsafe-inline'" + list(c.resourceDomains),
    "style-src 'unsafe-inline'" + list(c.resourceDomains),
    "img-src data: blob:" + list(c.resourceDomains),
    "font-src" + (list(c.resourceDomains) || " 'none'"),
    "connect-src" + (list(c.connectDomains) || " 'none'"),
    "frame-src" + (list(c.frameDomains) || " 'none'"),
  ].join("; ");
}

async function main() {
  const query = new URLSearchParams(location.search);
  const tool = query.get("tool");
  const args = JSON.parse(query.get("args") || "{}");
  const theme = query.get("theme") || "light";
  const reads = query.get("reads") !== "0";
  document.getElementById("call").textContent = tool + " " + JSON.stringify(args);

  const client = new Client(
    { name: "pyrun-app-test-host", version: "1.0.0" },
    { capabilities: { extensions: { [UI]: { mimeTypes: [MIME] } } } },
  );
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", location.href)));

  const { tools } = await client.listTools();
  const def = tools.find((t) => t.name === tool);
  if (!def) throw new Error("no tool " + tool);
  const meta = def._meta || {};
  const uri = meta.ui && meta.ui.resourceUri;
  if (!uri || meta["ui/resourceUri"] !== uri) throw new Error("tool meta names no app: " + JSON.stringify(meta));
  const { resources } = await client.listResources();
  const listed = resources.find((r) => r.uri === uri);
  if (!listed || listed.mimeType !== MIME) throw new Error("the app is not listed: " + JSON.stringify(resources.map((r) => r.uri)));
  const read = await client.readResource({ uri });
  const page = read.contents[0];
  if (page.mimeType !== MIME || typeof page.text !== "string") throw new Error("the app read as " + page.mimeType);

  const html = page.text.replace("<head>",
    '<head><meta http-equiv="Content-Security-Policy" content="' + csp(page._meta || listed._meta) + '">');
  const iframe = document.createElement("iframe");
  iframe.id = "app";
  iframe.title = "run viewer";
  iframe.setAttribute("sandbox", "allow-scripts");
  document.getElementById("frame").appendChild(iframe);

  const bridge = new AppBridge(
    client,
    { name: "pyrun-app-test-host", version: "1.0.0" },
    reads ? { serverTools: {}, serverResources: {}, logging: {} } : { serverTools: {}, logging: {} },
    { hostContext: { theme, displayMode: "inline", platform: "web", locale: "en-US",
      toolInfo: { tool: def } } },
  );
  bridge.onsizechange = ({ height }) => { if (height) iframe.style.height = Math.min(height + 2, 4000) + "px"; };
  let ready;
  const initialized = new Promise((resolve) => { ready = resolve; });
  bridge.oninitialized = () => ready();
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  iframe.srcdoc = html;
  await initialized;
  status("app ready");
  await bridge.sendToolInput({ arguments: args });
  const result = await client.callTool({ name: tool, arguments: args }, { timeout: 300000 });
  await bridge.sendToolResult(result);
  status("result sent");
}

main().catch((e) => status("error: " + (e && e.stack ? e.stack : e)));
