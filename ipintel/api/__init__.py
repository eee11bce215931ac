"""The two adapters over :class:`~ipintel.service.Intel`: ``rest`` (the JSON routes) and ``mcp`` (the MCP
tools on ``POST /mcp``). Both are thin: they read a request, call ``Intel`` and shape its answer."""
