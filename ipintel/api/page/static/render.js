// The rendering of a profile, shared by the page at / (page.js) and the MCP Apps card (ipintel/api/mcp/view/view.js,
// inlined with this file into ui://ipintel/profile): the sections, the world map with its marker, and each part in
// words. It asks nothing of the network; its caller brings the data.
//
// Safety: every value that comes from the API, and so from an upstream (RDAP remarks, PTR names, DNSBL details), is
// put into the document with textContent or setAttribute on elements created here; never as markup.
"use strict";

const IpintelRender = (function () {
  const SVG = "http://www.w3.org/2000/svg";
  // The sections each part fills, and the sections in the order they are shown: [id, heading, full width].
  const SECTIONS = { geo: ["location", "network"], vpn: ["vpn"], whois: ["whois"], blacklist: ["blacklist"], ptr: ["ptr"] };
  const ORDER = [
    ["location", "Location", true],
    ["network", "Network", false],
    ["ptr", "Host names", false],
    ["vpn", "Anonymiser verdict", false],
    ["whois", "Registry record", false],
    ["blacklist", "Blacklist check", true],
  ];

  // A renderer for the sections under `root` (a document or an element); the map outline is loaded from `mapHref`.
  function create(root, mapHref) {
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
      return root.querySelector(`#part-${section} .body`);
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

    function isError(part) {
      return part !== null && typeof part === "object" && part.error !== null && typeof part.error === "object";
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
      map.append(svgEl("image", { href: mapHref, x: 0, y: 0, width: 360, height: 180 }));
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

    // The sections of the given parts, in the page's order, into `grid` (what is not asked for is simply absent).
    function sections(grid, parts) {
      const wanted = new Set(parts.flatMap((name) => SECTIONS[name] || []));
      const made = ORDER.filter(([id]) => wanted.has(id)).map(([id, heading, wide]) =>
        el(
          "section",
          { id: `part-${id}`, class: wide ? "part part-wide" : "part", "aria-labelledby": `h-${id}` },
          el("h2", { id: `h-${id}` }, heading),
          el("div", { class: "body" }),
        ),
      );
      grid.replaceChildren(...made);
    }

    return { SECTIONS, el, body, fill, loading, partError, isError, show, sections };
  }

  return { create, SECTIONS };
})();
