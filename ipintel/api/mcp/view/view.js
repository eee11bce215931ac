
// The MCP Apps card (ui://ipintel/profile, docs/MCP.md#the-profile-card): a host renders it next to the result of
// profile_ip, lookup_ip or detect_vpn and hands it that result. It speaks to the host only through the extension's
// JSON-RPC over postMessage (ui/initialize, then the tool's input and result as notifications) and renders with
// render.js, the page's own renderer, so every upstream value is text. It asks nothing of the network: the one tool
// it may ask the host to call (check_blacklist, when the result has no blacklist part and the user asks for it) goes
// through the host, under the host's consent and rate limits.
(function () {
  const PROTOCOL_VERSION = "2026-01-26"; // the extension's stable revision
  const PARTS = ["geo", "vpn", "whois", "blacklist", "ptr"];
  const { el, show, sections, fill, partError } = IpintelRender.create(document, document.body.dataset.map);
  const root = document.documentElement;
  const pending = new Map();
  let nextId = 1;
  let hostCapabilities = {};
  let toolName = null; // from the host context's toolInfo, when the host gives it
  let asked = null; // the tool's arguments

  // ---- JSON-RPC over postMessage --------------------------------------------------------------------------------

  function post(message) {
    // The card cannot know its host's origin (it runs in an opaque sandbox); what it sends is not secret.
    window.parent.postMessage(message, "*");
  }

  function request(method, params) {
    const id = nextId++;
    post({ jsonrpc: "2.0", id, method, params });
    return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
  }

  function notify(method, params) {
    post({ jsonrpc: "2.0", method, params });
  }

  window.addEventListener("message", (event) => {
    if (event.source !== window.parent) return; // only the host speaks to the card
    const message = event.data;
    if (!message || typeof message !== "object" || message.jsonrpc !== "2.0") return;
    if (!("method" in message)) {
      const waiting = pending.get(message.id);
      if (!waiting) return;
      pending.delete(message.id);
      if (message.error) waiting.reject(message.error);
      else waiting.resolve(message.result || {});
      return;
    }
    const params = message.params || {};
    switch (message.method) {
      case "ui/notifications/tool-input":
        return onInput(params);
      case "ui/notifications/tool-result":
        return onResult(params);
      case "ui/notifications/tool-cancelled":
        return say("The tool call was cancelled", params.reason);
      case "ui/notifications/host-context-changed":
        return applyContext(params);
      case "ui/resource-teardown":
      case "ping":
        return post({ jsonrpc: "2.0", id: message.id, result: {} });
      default:
        if ("id" in message) {
          post({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "the card does not handle this method" } });
        }
    }
  });

  // ---- The host: theme, size ------------------------------------------------------------------------------------

  function applyContext(context) {
    if (context.theme === "light" || context.theme === "dark") root.dataset.theme = context.theme;
    const variables = context.styles && context.styles.variables;
    if (variables && typeof variables === "object") {
      for (const [name, value] of Object.entries(variables)) {
        if (/^--[a-z0-9-]+$/.test(name) && typeof value === "string") root.style.setProperty(name, value);
      }
    }
    const tool = context.toolInfo && context.toolInfo.tool;
    if (tool && typeof tool.name === "string") toolName = tool.name;
  }

  let lastSize = "";
  function reportSize() {
    const box = root.getBoundingClientRect();
    const size = { width: Math.ceil(box.width), height: Math.ceil(box.height) };
    const key = `${size.width}x${size.height}`;
    if (key !== lastSize) {
      lastSize = key;
      notify("ui/notifications/size-changed", size);
    }
  }

  // ---- Showing a result -----------------------------------------------------------------------------------------

  function say(headline, detail) {
    const status = document.getElementById("status");
    status.replaceChildren(el("strong", {}, `${headline}. `), detail ? `${String(detail)}.` : "");
    status.hidden = false;
    document.getElementById("profile").hidden = true;
    document.body.dataset.state = "done";
  }

  function title(ip) {
    document.getElementById("title").replaceChildren(el("span", { class: "address" }, String(ip)));
  }

  function onInput(params) {
    asked = params.arguments && typeof params.arguments === "object" ? params.arguments : {};
    const status = document.getElementById("status");
    status.replaceChildren(typeof asked.ip === "string" ? `Looking up ${asked.ip}…` : "Looking up…");
  }

  // The parts of a result, by the tool that gave it: profile_ip answers the parts by name, lookup_ip a GeoIP
  // record, detect_vpn a verdict. Without the tool's name (a host may not say), the shape tells them apart.
  function partsOf(data) {
    const name = toolName || (PARTS.some((p) => p in data) ? "profile_ip" : "isVpn" in data ? "detect_vpn" : "lookup_ip");
    if (name === "detect_vpn") return { vpn: data };
    if (name === "lookup_ip") return { geo: data };
    const parts = {};
    for (const part of PARTS) if (part in data) parts[part] = data[part];
    return parts;
  }

  function textOf(result) {
    const first = Array.isArray(result.content) ? result.content.find((c) => c && c.type === "text") : null;
    if (!first) return null;
    try {
      return JSON.parse(first.text);
    } catch (e) {
      return null;
    }
  }

  function onResult(result) {
    if (result.isError) {
      const failure = textOf(result);
      const error = failure && failure.error ? failure.error : { message: "the tool failed" };
      return say("Nothing to show", error.message);
    }
    const data = result.structuredContent && typeof result.structuredContent === "object" ? result.structuredContent : textOf(result);
    if (!data || typeof data !== "object") return say("Nothing to show", "the result holds no profile");
    const parts = partsOf(data);
    const ip = data.ip || (asked && asked.ip) || "";
    const offerBlacklist = !("blacklist" in parts) && /^\d{1,3}(\.\d{1,3}){3}$/.test(String(ip)) && hostCapabilities.serverTools;
    sections(document.querySelector("#profile .grid"), offerBlacklist ? [...Object.keys(parts), "blacklist"] : Object.keys(parts));
    title(ip);
    for (const [name, part] of Object.entries(parts)) show(name, part);
    if (offerBlacklist) offerBlacklistCheck(String(ip));
    document.getElementById("status").hidden = true;
    document.getElementById("profile").hidden = false;
    document.body.dataset.state = "done";
  }

  // The blacklist check is the slow part (every DNSBL, up to a few seconds): when the result has none, the card
  // offers it, and asks the host to call check_blacklist only when the user presses the button.
  function offerBlacklistCheck(ip) {
    const button = el("button", { type: "button" }, "Check the blacklists");
    button.addEventListener("click", async () => {
      button.disabled = true;
      button.textContent = "Checking…";
      try {
        const result = await request("tools/call", { name: "check_blacklist", arguments: { ip } });
        if (result.isError) {
          const failure = textOf(result);
          partError("blacklist", failure && failure.error ? failure.error : { code: "error", message: "the check failed" });
        } else {
          show("blacklist", result.structuredContent || textOf(result) || { error: { code: "invalid_response", message: "no result" } });
        }
      } catch (error) {
        partError("blacklist", { code: "host_refused", message: String((error && error.message) || "the host did not run the check") });
      }
    });
    fill("blacklist", el("p", {}, "Not part of this result. The check asks every blacklist and takes a few seconds."), button);
  }

  // ---- Start ----------------------------------------------------------------------------------------------------

  async function start() {
    try {
      const result = await request("ui/initialize", {
        protocolVersion: PROTOCOL_VERSION,
        appInfo: { name: "ipintel-profile", version: "1.0.0" },
        appCapabilities: { availableDisplayModes: ["inline"] },
      });
      hostCapabilities = result.hostCapabilities || {};
      applyContext(result.hostContext || {});
      notify("ui/notifications/initialized", {});
    } catch (error) {
      say("The host did not accept the card", error && error.message);
    }
    new ResizeObserver(reportSize).observe(root);
    reportSize();
  }

  start();
})();
