// The test host of tests/test_mcp_app_browser.py (see tests/support/mcp_app_host.py): a web host of the MCP Apps
// card with the extension's own host half, AppBridge from @modelcontextprotocol/ext-apps.
//
//   /host.html?mcp=<server /mcp URL>&tool=<tool>&args=<JSON>&theme=light|dark&sandbox=<proxy URL>[&click=<selector>][&limit=N]
//
// It speaks MCP 2026-07-28 to the real server (declaring the extension in every request's client capabilities),
// embeds the sandbox proxy, connects the bridge, and when the card has initialized sends it the tool's input, calls
// the tool on the server and sends the result. Tool calls the card asks for are run on the server (at most
// APP_CALL_LIMIT: the host's own rate limit). Everything it saw is written, base64 JSON, to body[data-report], and
// body[data-state] becomes "done".
import { AppBridge, PostMessageTransport, getToolUiResourceUri } from "@modelcontextprotocol/ext-apps/app-bridge";

const query = new URLSearchParams(location.search);
const MCP = query.get("mcp");
const TOOL = query.get("tool") || "profile_ip";
const ARGS = JSON.parse(query.get("args") || "{}");
const THEME = query.get("theme") || "light";
const CLICK = query.get("click");
const APP_CALL_LIMIT = Number(query.get("limit") || 2); // tool calls the host runs for the card
const CAPABILITIES = { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: ["text/html;profile=mcp-app"] } } };

const report = { errors: [], sizes: [], appCalls: [], refusedAppCalls: 0 };
document.body.dataset.theme = THEME;
document.getElementById("asked").textContent = `${TOOL} ${JSON.stringify(ARGS)}`;

function finish() {
  const bytes = new TextEncoder().encode(JSON.stringify(report));
  let binary = "";
  for (let i = 0; i < bytes.length; i += 8192) binary += String.fromCharCode(...bytes.subarray(i, i + 8192));
  document.body.dataset.report = btoa(binary);
  document.body.dataset.state = "done";
}
window.addEventListener("error", (event) => report.errors.push(String(event.message)));
window.addEventListener("unhandledrejection", (event) => report.errors.push(String(event.reason && event.reason.stack || event.reason)));
setTimeout(() => {
  report.errors.push("timed out");
  finish();
}, 20000);

let nextId = 0;
async function rpc(method, params, name) {
  const headers = {
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": method,
  };
  if (name) headers["Mcp-Name"] = name;
  const meta = { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": CAPABILITIES };
  const body = { jsonrpc: "2.0", id: ++nextId, method, params: { ...params, _meta: meta } };
  const response = await fetch(MCP, { method: "POST", headers, body: JSON.stringify(body) });
  const answer = await response.json();
  if (answer.error) throw new Error(`${method}: ${answer.error.message}`);
  const { resultType, _meta, ...result } = answer.result; // the 2026-07-28 envelope fields are the host's, not the card's
  return result;
}

async function main() {
  const { tools } = await rpc("tools/list", {});
  const tool = tools.find((t) => t.name === TOOL);
  report.toolMeta = tool._meta || null;
  const uri = getToolUiResourceUri(tool);
  report.resourceUri = uri || null;
  if (!uri) return finish();
  const read = await rpc("resources/read", { uri }, uri);
  const content = read.contents[0];
  report.resource = { mimeType: content.mimeType, bytes: new TextEncoder().encode(content.text).length, meta: content._meta };
  const ui = (content._meta && content._meta.ui) || {};

  const frame = document.createElement("iframe");
  frame.setAttribute("sandbox", "allow-scripts allow-same-origin");
  frame.setAttribute("title", "ipintel card");
  frame.style.height = "120px";
  document.getElementById("slot").append(frame);
  report.proxySandbox = frame.getAttribute("sandbox");

  const bridge = new AppBridge(
    null,
    { name: "ipintel-test-host", version: "1.0.0" },
    { serverTools: {}, logging: {} },
    { hostContext: { theme: THEME, displayMode: "inline", availableDisplayModes: ["inline"], platform: "web", toolInfo: { tool } } },
  );
  bridge.onsizechange = ({ width, height }) => {
    report.sizes.push({ width, height });
    if (height) frame.style.height = `${height}px`;
  };
  bridge.oncalltool = async (params) => {
    if (report.appCalls.length >= APP_CALL_LIMIT) {
      report.refusedAppCalls += 1;
      throw new Error("the host's limit of tool calls from this card is spent");
    }
    report.appCalls.push({ name: params.name, arguments: params.arguments });
    return rpc("tools/call", { name: params.name, arguments: params.arguments }, params.name);
  };
  bridge.onsandboxready = () => {
    bridge.sendSandboxResourceReady({ html: content.text, csp: ui.csp, permissions: ui.permissions });
  };
  bridge.oninitialized = async () => {
    report.initialized = true;
    report.appCapabilities = bridge.getAppCapabilities() || null;
    await bridge.sendToolInput({ arguments: ARGS });
    const result = await rpc("tools/call", { name: TOOL, arguments: ARGS }, TOOL);
    report.toolResultText = result.content && result.content[0] && result.content[0].text;
    report.resultSentAt = performance.timeOrigin + performance.now();
    await bridge.sendToolResult(result);
  };

  // What the proxy reports of the card (not JSON-RPC: the test's own channel).
  window.addEventListener("message", (event) => {
    if (event.source !== frame.contentWindow || !event.data || event.data.test !== "ipintel") return;
    const data = event.data;
    if (data.kind === "loaded") {
      report.csp = data.csp;
      report.cardSandbox = data.sandbox;
    } else if (data.kind === "rendered") {
      report.renderedAt = data.at;
      report.renderMs = data.at - report.resultSentAt;
      report.dom = data.dom;
      if (CLICK) frame.contentWindow.postMessage({ test: "ipintel", kind: "click", selector: CLICK }, "*");
      else setTimeout(finish, 300); // the size notifications of the rendered card
    } else if (data.kind === "clicked") {
      report.afterClick = data.dom;
      setTimeout(finish, 300);
    }
  });

  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  frame.src = query.get("sandbox");
}

main().catch((error) => {
  report.errors.push(String(error && error.stack || error));
  finish();
});
