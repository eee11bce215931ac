#!/usr/bin/env node
// The MCP TypeScript SDK 2.x client and the MCP Apps card, for tests/test_mcp_apps_sdk.py.
//
//   node tests/support/mcp_ts_apps_client.mjs <url> <mode> <declare: yes|no>
//
// Connects in <mode> (`legacy`, `auto` or a version to pin), declaring the io.modelcontextprotocol/ui extension
// in its capabilities when <declare> is yes, then lists the resources, reads every ui:// one, lists the tools
// (with the ext-apps SDK's getToolUiResourceUri on each) and calls profile_ip and calculate_cidr. Prints ONE
// JSON document on stdout, with the raw answers of the HTTP exchanges; the test decides what passes.
import { createRequire } from 'node:module';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const nodeDir = resolve(process.env.MCP_NODE_DIR ?? join(here, '..', '..', '.venv', 'node'));
const require = createRequire(join(nodeDir, 'package.json'));

async function importEsm(name, subpath = '.') {
    const root = join(nodeDir, 'node_modules', name);
    const { exports } = require(join(root, 'package.json'));
    const entry = exports[subpath];
    return import(pathToFileURL(join(root, entry.import?.default ?? entry.default)).href);
}

const { Client, StreamableHTTPClientTransport } = await importEsm('@modelcontextprotocol/client');
const { getToolUiResourceUri, RESOURCE_MIME_TYPE } = await importEsm('@modelcontextprotocol/ext-apps', './app-bridge');

const [url, mode, declare] = process.argv.slice(2);
const raw = [];
async function recordingFetch(input, init = {}) {
    const response = await fetch(input, init);
    if ((response.headers.get('content-type') ?? '').startsWith('application/json')) {
        raw.push({ sent: typeof init.body === 'string' ? JSON.parse(init.body) : null, received: await response.clone().json() });
    }
    return response;
}

const capabilities = declare === 'yes' ? { extensions: { 'io.modelcontextprotocol/ui': { mimeTypes: [RESOURCE_MIME_TYPE] } } } : {};
const versionNegotiation = { mode: mode === 'legacy' || mode === 'auto' ? mode : { pin: mode } };
const client = new Client({ name: 'ipintel-tests-ts-apps', version: '1.0.0' }, { capabilities, versionNegotiation });
const out = { mode, declare, errors: [] };
try {
    await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch }));
    out.protocolVersion = client.getNegotiatedProtocolVersion() ?? null;
    out.serverCapabilities = client.getServerCapabilities() ?? null;
    out.resources = (await client.listResources()).resources;
    out.read = {};
    for (const resource of out.resources) {
        if (resource.uri.startsWith('ui://')) out.read[resource.uri] = (await client.readResource({ uri: resource.uri })).contents;
    }
    out.tools = (await client.listTools()).tools;
    out.linked = Object.fromEntries(out.tools.map(tool => [tool.name, getToolUiResourceUri(tool) ?? null]));
    out.calls = {};
    for (const [name, args] of [['profile_ip', { ip: '8.8.8.8', include: ['geo', 'vpn'] }], ['calculate_cidr', { range: '10.0.0.0/8' }]]) {
        out.calls[name] = await client.callTool({ name, arguments: args });
    }
    await client.close();
} catch (error) {
    out.errors.push(String(error?.stack ?? error));
}
out.raw = raw;
process.stdout.write(JSON.stringify(out) + '\n');
