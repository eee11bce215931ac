"""The MCP adapter, ``POST /mcp``: ``transport`` (HTTP: origins, CORS, body limit, statuses), ``envelope``
(which protocol revision a request speaks, and the 2026-07-28 checks), ``protocol`` (JSON-RPC 2.0 and the
methods of both eras) and ``tools`` (each tool one ``Intel`` call). See docs/MCP.md."""
