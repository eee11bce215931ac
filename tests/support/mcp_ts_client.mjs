#!/usr/bin/env node
// The MCP TypeScript SDK 2.x client against a running server, for tests/test_mcp_typescript.py.
//
//   node tests/support/mcp_ts_client.mjs <url> <mode>  < calls.json
//
// <mode> is `legacy`, `auto` or a protocol version to pin (`2026-07-28`): the client's
// `versionNegotiation.mode` ('legacy' | 'auto' | { pin }). stdin holds a JSON array of
// {"name": ..., "arguments": {...}}. The script connects over Streamable HTTP, lists the tools,
// compiles every tool's outputSchema (and inputSchema) with strict Ajv (draft 2020-12, ajv-formats),
// makes each call, validates every structuredContent against its tool's outputSchema, and prints ONE
// JSON document on stdout: the negotiated protocol version and era, the listing, each call's outcome,
// and the HTTP exchanges it made (for reporting what was sent and received). It exits 0 whenever it
// could print that document; the test decides what passes.
//
// The packages come from $MCP_NODE_DIR (default: .venv/node, where `make test` installs them).
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const nodeDir = resolve(process.env.MCP_NODE_DIR ?? join(here, '..', '..', '.venv', 'node'));
const require = createRequire(join(nodeDir, 'package.json'));

async function importEsm(name) {
    const root = join(nodeDir, 'node_modules', name);
    const { exports } = require(join(root, 'package.json'));
    return import(pathToFileURL(join(root, exports['.'].import.default)).href);
}

const { Client, StreamableHTTPClientTransport } = await importEsm('@modelcontextprotocol/client');
const Ajv2020 = require('ajv/dist/2020').default;
const addFormats = require('ajv-formats').default;

const [url, mode] = process.argv.slice(2);
const calls = JSON.parse(await new Promise(done => {
    let text = '';
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', chunk => (text += chunk));
    process.stdin.on('end', () => done(text || '[]'));
}));

// Every HTTP exchange, as the client sent it and as the server answered.
const wire = [];
async function recordingFetch(input, init = {}) {
    const headers = Object.fromEntries(new Headers(init.headers ?? {}).entries());
    const entry = { method: init.method ?? 'GET', url: String(input), requestHeaders: headers };
    if (typeof init.body === 'string') entry.requestBody = init.body;
    wire.push(entry);
    let response;
    try {
        response = await fetch(input, init);
    } catch (error) {
        entry.fetchError = String(error);
        throw error;
    }
    entry.status = response.status;
    entry.responseHeaders = Object.fromEntries(response.headers.entries());
    const type = response.headers.get('content-type') ?? '';
    if (type.startsWith('application/json') || type.startsWith('text/event-stream')) {
        entry.responseBody = await response.clone().text();
    }
    return response;
}

function errorInfo(error) {
    if (error === null || error === undefined) return null;
    const info = { name: error.name ?? typeof error, message: String(error.message ?? error) };
    for (const key of ['code', 'data']) if (error[key] !== undefined) info[key] = error[key];
    if (error.cause) info.cause = errorInfo(error.cause);
    return info;
}

function strictAjv() {
    const ajv = new Ajv2020({ strict: true, allErrors: true });
    addFormats(ajv);
    return ajv;
}

function compile(schema) {
    if (schema === undefined) return { validate: null, error: 'no schema' };
    try {
        return { validate: strictAjv().compile(schema), error: null };
    } catch (error) {
        return { validate: null, error: String(error.message ?? error) };
    }
}

const out = { mode, url, wire, protocolVersion: null, era: null };
const versionNegotiation = { mode: mode === 'legacy' || mode === 'auto' ? mode : { pin: mode } };
const client = new Client({ name: 'ipintel-tests-ts', version: '1.0.0' }, { versionNegotiation });
const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch });

try {
    await client.connect(transport);
    out.connected = true;
} catch (error) {
    out.connected = false;
    out.connectError = errorInfo(error);
}

if (out.connected) {
    out.protocolVersion = client.getNegotiatedProtocolVersion() ?? null;
    out.era = client.getProtocolEra() ?? null;
    out.serverInfo = client.getServerVersion() ?? null;
    out.serverCapabilities = client.getServerCapabilities() ?? null;
    out.instructions = client.getInstructions() ?? null;
    out.discover = client.getDiscoverResult() ?? null;

    const validators = {};
    try {
        const listing = await client.listTools();
        out.tools = listing.tools;
        out.schemas = {};
        for (const tool of listing.tools) {
            const output = compile(tool.outputSchema);
            const input = compile(tool.inputSchema);
            validators[tool.name] = output.validate;
            out.schemas[tool.name] = { outputSchemaError: output.error, inputSchemaError: input.error };
        }
    } catch (error) {
        out.listError = errorInfo(error);
    }

    out.calls = [];
    for (const { name, arguments: args } of calls) {
        const outcome = { name, arguments: args };
        out.calls.push(outcome);
        try {
            const result = await client.callTool({ name, arguments: args });
            outcome.result = result;
            outcome.isError = result.isError === true;
            outcome.hasStructuredContent = result.structuredContent !== undefined;
            const text = result.content?.find(block => block.type === 'text')?.text;
            outcome.text = text ?? null;
            const validate = validators[name];
            if (outcome.hasStructuredContent) {
                if (validate) {
                    outcome.schemaValid = validate(result.structuredContent);
                    outcome.schemaErrors = validate.errors ?? null;
                } else {
                    outcome.schemaValid = false;
                    outcome.schemaErrors = `no compiled outputSchema for ${name}`;
                }
            }
        } catch (error) {
            outcome.thrown = errorInfo(error);
        }
    }
    try {
        await client.close();
    } catch (error) {
        out.closeError = errorInfo(error);
    }
}

process.stdout.write(JSON.stringify(out));
process.stdout.write('\n');
