// The page at /: a view of GET /ip/{ip}/profile (docs/API.md, "The page").
//
// The rendering (sections, map, each part in words) is render.js, shared with the MCP Apps card; this file asks the
// API and decides what to show. Safety: every value from the API is put into the page as text (render.js says how);
// the page runs under a Content-Security-Policy that allows only this origin (no inline script or style).
//
// Loading: the profile is asked in three calls at once, one per group of parts, so that what is quick is shown
// while the slow parts are still on their way:
//   geo, vpn, ptr  local databases and feeds, and one reverse-DNS query
//   blacklist      every DNSBL and the reputation API, bounded by IPINTEL_BLACKLIST_DEADLINE (3 s)
//   whois          RDAP, which may follow redirects between registries, each hop up to IPINTEL_UPSTREAM_TIMEOUT
// Three calls rather than five (one a part): fewer requests against the caller's rate limit, and geo, vpn and
// ptr take about as long as each other. Rather than one: the registry and the blacklist check are the slow
// upstreams, and each is shown as soon as it arrives.
"use strict";

(function () {
  const GROUPS = [["geo", "vpn", "ptr"], ["blacklist"], ["whois"]];
  const { SECTIONS, el, loading, show, sections } = IpintelRender.create(document, "/page/world.svg");
  let wholeRefused = false; // one call found the address refused as a whole: the others' answers are not shown

  // ---- The API ------------------------------------------------------------------------------------------------

  async function getJson(path) {
    let response;
    try {
      response = await fetch(path, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    } catch (e) {
      return { status: 0, body: { error: { code: "network_error", message: "the service could not be reached" } } };
    }
    let answer;
    try {
      answer = await response.json();
    } catch (e) {
      answer = { error: { code: "invalid_response", message: `the service answered HTTP ${response.status} without JSON` } };
    }
    return { status: response.status, retryAfter: response.headers.get("Retry-After"), body: answer };
  }

  function errorOf(reply) {
    const error = (reply.body && reply.body.error) || { code: "invalid_response", message: `HTTP ${reply.status}` };
    if (reply.status === 429 && reply.retryAfter) {
      return { code: error.code, message: `${error.message} (try again in ${reply.retryAfter} s)` };
    }
    return error;
  }

  // {parts: {name: data | {error}}} or {error} when the address as a whole is refused (or the call failed).
  async function profile(ip, parts) {
    const reply = await getJson(`/ip/${encodeURIComponent(ip)}/profile?include=${parts.join(",")}`);
    if (reply.body && reply.body.data) return { parts: reply.body.data };
    return { error: errorOf(reply) };
  }

  // ---- The page -------------------------------------------------------------------------------------------------

  function notice(...children) {
    const status = document.getElementById("status");
    status.replaceChildren(...children);
    status.hidden = false;
    document.getElementById("profile").hidden = true;
  }

  function refused(error, own) {
    if (own && error.code === "reserved_address") {
      notice(
        el("strong", {}, "Your own address is not a public one, so there is nothing public to show about it. "),
        `The service says: ${String(error.message)}. `,
        "This is usual on a laptop or inside a private network. Type a public address in the search box to look it up.",
      );
    } else {
      notice(el("strong", {}, "Nothing to show. "), `${String(error.message)}. `, "Try another address in the search box.");
    }
    wholeRefused = true;
    document.getElementById("ip").focus();
  }

  function begin(ip, own) {
    document.title = `${ip} — ipintel`;
    const title = document.getElementById("title");
    title.replaceChildren(own ? "Your address: " : "", el("span", { class: "address" }, ip));
    document.getElementById("profile").hidden = false;
    for (const sections of Object.values(SECTIONS)) sections.forEach(loading);
  }

  async function loadGroup(ip, parts, own) {
    const answer = await profile(ip, parts);
    if (wholeRefused) return; // the address was refused as a whole by another call
    if (answer.error) {
      if (["invalid_ip", "reserved_address"].includes(answer.error.code)) return refused(answer.error, own);
      for (const name of parts) show(name, { error: answer.error });
      return;
    }
    if (answer.parts.ip) document.querySelector("#title .address").textContent = String(answer.parts.ip);
    for (const name of parts) show(name, answer.parts[name] === undefined ? { error: { code: "missing", message: "not in the answer" } } : answer.parts[name]);
  }

  async function main() {
    sections(document.querySelector("#profile .grid"), Object.keys(SECTIONS));
    const asked = (new URLSearchParams(window.location.search).get("ip") || "").trim();
    document.getElementById("ip").value = asked;
    if (asked) {
      begin(asked, false);
      await Promise.all(GROUPS.map((parts) => loadGroup(asked, parts, false)));
      document.body.dataset.state = "done";
      return;
    }
    // The caller's own address: GET /ip answers its GeoIP record, or 422 for a non-global caller.
    const own = await getJson("/ip");
    if (!(own.body && own.body.data)) {
      refused(errorOf(own), true);
      document.body.dataset.state = "done";
      return;
    }
    const ip = String(own.body.data.ip);
    begin(ip, true);
    show("geo", own.body.data);
    const groups = GROUPS.map((parts) => parts.filter((p) => p !== "geo")).filter((parts) => parts.length);
    await Promise.all(groups.map((parts) => loadGroup(ip, parts, true)));
    document.body.dataset.state = "done";
  }

  document.addEventListener("DOMContentLoaded", () => {
    main().catch(() => {
      notice("Something went wrong while showing this page; the API itself is at ", el("a", { href: "/docs" }, "/docs"), ".");
      document.body.dataset.state = "done";
    });
  });
})();
