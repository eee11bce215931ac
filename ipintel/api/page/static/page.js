// The page at /: a view of GET /ip/{ip}/profile (README, "The page").
//
// Safety: every value that comes from the API, and so from an upstream (RDAP remarks, PTR names, DNSBL details),
// is put into the page with textContent or setAttribute on elements created here; never as markup. The page runs
// under a Content-Security-Policy that allows only this origin (no inline script or style).
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
  // The sections of the page each part fills.
  const SECTIONS = { geo: ["location", "network"], vpn: ["vpn"], whois: ["whois"], blacklist: ["blacklist"], ptr: ["ptr"] };
  const SVG = "http://www.w3.org/2000/svg";
  let wholeRefused = false; // one call found the address refused as a whole: the others' answers are not shown

  // ---- DOM helpers: text only --------------------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  function svgEl(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
    return node;
  }

  function unknown(text) {
    return el("span", { class: "unknown" }, text || "unknown");
  }

  // A value, or "unknown" in words (the API's null).
  function value(v) {
    return v === null || v === undefined || v === "" ? unknown() : String(v);
  }

  // A definition list from [term, description] rows; a row whose description is undefined is left out.
  function facts(rows) {
    const list = el("dl", { class: "facts" });
    for (const [term, description] of rows) {
      if (description === undefined) continue;
      list.append(el("dt", {}, term), el("dd", {}, description));
    }
    return list;
  }

  function body(section) {
    return document.querySelector(`#part-${section} .body`);
  }

  function fill(section, ...nodes) {
    const target = body(section);
    target.replaceChildren(...nodes);
    target.removeAttribute("aria-busy");
    target.classList.remove("loading");
  }

  function loading(section) {
    const target = body(section);
    target.replaceChildren(el("p", {}, "Loading…"));
    target.setAttribute("aria-busy", "true");
    target.classList.add("loading");
  }

  function partError(section, error) {
    fill(
      section,
      el(
        "p",
        { class: "part-error" },
        el("strong", {}, "Could not get this part: "),
        String(error.message || "no message"),
        " ",
        el("code", {}, `(${String(error.code || "error")})`),
      ),
    );
  }

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

  function isError(part) {
    return part !== null && typeof part === "object" && part.error !== null && typeof part.error === "object";
  }

  // {parts: {name: data | {error}}} or {error} when the address as a whole is refused (or the call failed).
  async function profile(ip, parts) {
    const reply = await getJson(`/ip/${encodeURIComponent(ip)}/profile?include=${parts.join(",")}`);
    if (reply.body && reply.body.data) return { parts: reply.body.data };
    return { error: errorOf(reply) };
  }

  // ---- Rendering each part --------------------------------------------------------------------------------------

  function degrees(v, positive, negative) {
    return `${Math.abs(v).toFixed(4)}° ${v >= 0 ? positive : negative}`;
  }

  function countryName(code) {
    if (!code) return unknown();
    try {
      const name = new Intl.DisplayNames(["en"], { type: "region" }).of(code);
      if (name && name !== code) return `${name} (${code})`;
    } catch (e) {
      /* an engine without Intl.DisplayNames: the code alone */
    }
    return String(code);
  }

  function timeZone(zone) {
    if (!zone) return unknown();
    try {
      const now = new Intl.DateTimeFormat("en-GB", {
        timeZone: zone,
        weekday: "short",
        hour: "2-digit",
        minute: "2-digit",
      }).format(new Date());
      return `${zone} (local time ${now})`;
    } catch (e) {
      return String(zone);
    }
  }

  // An equirectangular world map (x = longitude + 180, y = 90 - latitude on a 360 x 180 box) with one marker.
  function worldMap(lat, lon) {
    const known = typeof lat === "number" && typeof lon === "number";
    const caption = known
      ? `Map: a marker at ${degrees(lat, "N", "S")}, ${degrees(lon, "E", "W")}.`
      : "Map: the coordinates are unknown, so there is no marker.";
    const map = svgEl("svg", { viewBox: "0 0 360 180", class: "map", role: "img", "aria-label": caption });
    map.append(svgEl("image", { href: "/page/world.svg", x: 0, y: 0, width: 360, height: 180 }));
    if (known) {
      const x = lon + 180;
      const y = 90 - lat;
      // Cross hairs and a ringed dot: the place is found by shape, not by colour.
      map.append(svgEl("path", { class: "map-crosshair", d: `M${x} 0V180M0 ${y}H360` }));
      map.append(svgEl("circle", { class: "map-halo", cx: x, cy: y, r: 4.2 }));
      map.append(
        svgEl("circle", { class: "map-marker", cx: x, cy: y, r: 2.4, "data-latitude": lat, "data-longitude": lon }),
      );
    }
    return el("figure", { class: "map-figure" }, map, el("figcaption", {}, caption));
  }

  function renderLocation(geo) {
    const known = typeof geo.latitude === "number" && typeof geo.longitude === "number";
    fill(
      "location",
      el(
        "div",
        { class: "location" },
        facts([
          ["City", value(geo.city)],
          ["Region", value(geo.region)],
          ["Country", countryName(geo.country)],
          ["Time zone", timeZone(geo.timezone)],
          [
            "Coordinates",
            known ? `${degrees(geo.latitude, "N", "S")}, ${degrees(geo.longitude, "E", "W")}` : unknown(),
          ],
        ]),
        worldMap(geo.latitude, geo.longitude),
      ),
    );
  }

  function renderNetwork(geo) {
    fill(
      "network",
      facts([
        ["AS", geo.asn ? el("span", {}, el("span", { class: "asn" }, geo.asn), geo.isp ? ` ${geo.isp}` : "") : unknown()],
        ["Organisation", value(geo.org)],
        ["Prefix", value(geo.network)],
      ]),
    );
  }

  const REASON_WORDS = [
    [/^tor-exit$/, () => "on the Tor Project's list of exit nodes"],
    [/^anonymous-db:(.+)$/, (m) => `the Anonymous-IP database flags it: ${m[1].replace(/-/g, " ")}`],
    [/^connection-type:(.+)$/, (m) => `the Connection-Type database says: ${m[1]}`],
    [/^vpn-range:(.+)$/, (m) => `in a VPN list (${m[1]})`],
    [/^cloud:(.+)$/, (m) => `in the published address ranges of the cloud provider ${m[1].toUpperCase()}`],
    [/^datacenter:(.+)$/, (m) => `in a datacenter list (${m[1]})`],
    [/^asn-vpn:(.+)$/, (m) => `${m[1]} belongs to a VPN operator`],
    [/^asn-hosting:(.+)$/, (m) => `${m[1]} belongs to a hosting provider`],
    [/^asn-mobile:(.+)$/, (m) => `${m[1]} belongs to a mobile carrier`],
    [/^ptr:(.+)$/, (m) => `its host name suggests: ${m[1].replace(/-/g, " ")}`],
  ];

  function reasonWords(reason) {
    for (const [pattern, words] of REASON_WORDS) {
      const match = pattern.exec(reason);
      if (match) return words(match);
    }
    return "a signal";
  }

  function confidenceWords(vpn) {
    const positive = {
      high: "high: the exact address is on a primary list (Tor exits, a VPN provider's servers, the Anonymous-IP database)",
      medium: "medium: the address falls in a VPN operator's prefix or AS",
      low: "low: only its host name points that way",
    };
    const negative = {
      high: "high",
      medium: "medium: every detection source was loaded and up to date",
      low: "low: a detection source was missing or out of date",
    };
    return (vpn.isVpn ? positive : negative)[vpn.confidence] || String(vpn.confidence);
  }

  function yesNo(flag) {
    return flag ? el("strong", {}, "Yes") : "No";
  }

  function renderVpn(vpn) {
    let verdict = "No: nothing marks it as a VPN, proxy or Tor exit";
    if (vpn.isTor) verdict = "Yes: a Tor exit node";
    else if (vpn.isProxy) verdict = "Yes: a proxy";
    else if (vpn.isVpn) verdict = "Yes: a VPN";
    else if (vpn.isRelay) verdict = "A privacy relay (iCloud Private Relay): it hides its user, but is not a VPN";
    const reasons = Array.isArray(vpn.reasons) ? vpn.reasons : [];
    fill(
      "vpn",
      el("p", { class: "verdict" }, el("strong", {}, "Anonymiser: "), verdict),
      el("p", {}, "Confidence ", confidenceWords(vpn), "."),
      facts([
        ["VPN or anonymiser", yesNo(vpn.isVpn)],
        ["Proxy", yesNo(vpn.isProxy)],
        ["Tor exit", yesNo(vpn.isTor)],
        ["Hosting (datacenter or cloud)", yesNo(vpn.isHosting)],
        ["Mobile network", yesNo(vpn.isMobile)],
        ["Privacy relay", yesNo(vpn.isRelay)],
        ["Operator", vpn.provider ? String(vpn.provider) : unknown("not named by any source")],
      ]),
      el("h3", {}, "Reasons"),
      reasons.length
        ? el("ul", { class: "reasons" }, ...reasons.map((r) => el("li", {}, reasonWords(r), " ", el("code", {}, String(r)))))
        : el("p", {}, "No signal fired."),
    );
  }

  function dateOf(text) {
    return /^\d{4}-\d{2}-\d{2}/.test(String(text)) ? String(text).slice(0, 10) : String(text);
  }

  function abuseContact(abuse) {
    if (abuse === undefined) return undefined; // the API does not give it (yet)
    if (abuse === null) return unknown("none given");
    const lines = [abuse.name, abuse.email, abuse.phone].filter((x) => x);
    return lines.length ? el("span", { class: "lines" }, ...lines.map((line) => el("span", {}, String(line)))) : unknown("none given");
  }

  function renderWhois(whois) {
    const events = Array.isArray(whois.events) ? whois.events : [];
    const range =
      whois.startAddress || whois.endAddress ? `${whois.startAddress || "?"} – ${whois.endAddress || "?"}` : unknown();
    fill(
      "whois",
      facts([
        ["Holder", el("span", { class: "holder" }, value(whois.registrant))],
        ["Network", whois.name || whois.handle ? [whois.name, whois.handle].filter((x) => x).join(" · ") : unknown()],
        ["Range", range],
        ["Registry", value(whois.registry)],
        ["Country", whois.country ? countryName(whois.country) : unknown("not given")],
        [
          "Dates",
          events.length
            ? el(
                "ul",
                { class: "events" },
                ...events.map((e) => el("li", {}, `${String(e.action)}: `, el("time", { datetime: String(e.date) }, dateOf(e.date)))),
              )
            : unknown("none given"),
        ],
        ["Abuse contact", abuseContact(whois.abuse)],
      ]),
    );
  }

  const STATUS_WORDS = { listed: "✗ Listed", clear: "✓ Clear", unavailable: "? Unavailable" };

  function renderBlacklist(check) {
    const sources = Array.isArray(check.sources) ? check.sources : [];
    const listed = sources.filter((s) => s.status === "listed").length;
    let summary = `Unknown: not every source answered, and none of those that did lists it.`;
    if (check.status === "listed") summary = `Listed by ${listed} of ${sources.length} sources.`;
    else if (check.status === "clear") summary = `Clear: none of the ${sources.length} sources lists it.`;
    const rows = sources.map((s) =>
      el(
        "tr",
        { class: `source source-${s.status}` },
        el("th", { scope: "row" }, String(s.name)),
        el("td", { class: "source-status" }, STATUS_WORDS[s.status] || String(s.status)),
        el("td", { class: "source-detail" }, s.detail ? String(s.detail) : "—"),
      ),
    );
    fill(
      "blacklist",
      el("p", { class: "verdict" }, el("strong", {}, summary)),
      el(
        "div",
        { class: "table-scroll" },
        el(
          "table",
          {},
          el("caption", {}, "Each source and what it answered"),
          el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Source"), el("th", { scope: "col" }, "Status"), el("th", { scope: "col" }, "Detail"))),
          el("tbody", {}, ...rows),
        ),
      ),
    );
  }

  function renderPtr(reverse) {
    const names = (Array.isArray(reverse.records) ? reverse.records : []).map((r) => String(r.data));
    fill(
      "ptr",
      names.length
        ? el("ul", { class: "hostnames" }, ...names.map((name) => el("li", {}, el("code", {}, name))))
        : el("p", {}, "No host name: the address has no PTR record."),
    );
  }

  const RENDER = {
    geo: (geo) => {
      renderLocation(geo);
      renderNetwork(geo);
    },
    vpn: renderVpn,
    whois: renderWhois,
    blacklist: renderBlacklist,
    ptr: renderPtr,
  };

  function show(name, part) {
    if (isError(part)) {
      for (const section of SECTIONS[name]) partError(section, part.error);
      return;
    }
    try {
      RENDER[name](part);
    } catch (e) {
      for (const section of SECTIONS[name]) {
        partError(section, { code: "display_error", message: "this part's answer could not be shown" });
      }
    }
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
