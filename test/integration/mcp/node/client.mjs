// A second MCP client for `nsbox mcp`: the official TypeScript SDK's client,
// over stdio. Usage: node client.mjs NSBOX_BIN WORKSPACE [NSBOX_MCP_FLAGS...]
// or, over the streamable HTTP transport of a running `nsbox mcp --http`:
// node client.mjs --http URL TOKEN
//
// It lists and calls the tools against the server and prints one JSON
// object with what it saw; test/integration/mcp/node_test.go checks it. Any
// protocol failure makes it exit non-zero with the error on stderr.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError, ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [bin, workspace, ...flags] = process.argv.slice(2);
if (!bin || !workspace) {
  console.error("usage: node client.mjs NSBOX_BIN WORKSPACE");
  process.exit(2);
}
const overHTTP = bin === "--http";

const transport = overHTTP
  ? new StreamableHTTPClientTransport(new URL(workspace), {
      requestInit: { headers: { Authorization: `Bearer ${flags[0] ?? ""}` } },
    })
  : new StdioClientTransport({
      command: bin,
      args: ["mcp", "--workspace", workspace, ...flags],
      cwd: workspace,
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: process.env.HOME ?? "/nonexistent",
        XDG_CONFIG_HOME: process.env.XDG_CONFIG_HOME ?? "",
        XDG_DATA_HOME: process.env.XDG_DATA_HOME ?? "",
        LANG: "C.UTF-8",
      },
      stderr: "inherit",
    });
const client = new Client({ name: "nsbox-node-test", version: "1.0.0" });
let listChanged = 0;
client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
  listChanged++;
});
// Protocol errors the SDK reports on its own, such as "Received a response
// for an unknown message ID" (the answer to a request it cancelled).
const protocolErrors = [];
client.onerror = (e) => protocolErrors.push(String(e?.message ?? e));
await client.connect(transport);

const out = { server: client.getServerVersion(), protocolTools: [], calls: {} };

const { tools } = await client.listTools();
for (const t of tools) {
  out.protocolTools.push({
    name: t.name,
    title: t.title ?? null,
    annotations: t.annotations ?? null,
    schemaType: t.inputSchema?.type,
    hasOutputSchema: !!t.outputSchema,
  });
}

// callTool validates structuredContent against each tool's outputSchema.
async function call(name, args) {
  const res = await client.callTool({ name, arguments: args });
  const text = (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
  return { isError: !!res.isError, text, structured: res.structuredContent ?? null };
}

// Cancel a call that runs (the SDK sends notifications/cancelled): the
// server must not answer it. The next call's answer comes after the
// cancelled one's would have.
{
  const ac = new AbortController();
  const pending = client.callTool({ name: "run_command", arguments: { command: "sleep 1000", timeout: 600 } }, undefined, { signal: ac.signal });
  await new Promise((r) => setTimeout(r, 500));
  ac.abort("the test cancels it");
  try {
    await pending;
    out.cancelled = "answered";
  } catch (e) {
    out.cancelled = "aborted";
  }
  out.calls.afterCancel = await call("run_command", { command: "echo after-cancel" });
  await new Promise((r) => setTimeout(r, 200));
}

if (overHTTP) {
  out.calls.run = await call("run_command", { command: "echo over-http" });
  out.protocolErrors = protocolErrors;
  await transport.terminateSession();
  await client.close();
  console.log(JSON.stringify(out));
  process.exit(0);
}

out.calls.write = await call("write_file", { path: "from-node.txt", content: "written by the TypeScript client\n" });
out.calls.read = await call("read_file", { path: "from-node.txt" });
out.calls.run = await call("run_command", { command: "cat from-node.txt; id -u" });
out.calls.list = await call("list_directory", {});
out.calls.escape = await call("read_file", { path: "../../etc/passwd" });

try {
  await client.callTool({ name: "no_such_tool", arguments: {} });
  out.unknownTool = { error: null };
} catch (e) {
  out.unknownTool = { error: e instanceof McpError ? e.code : String(e) };
}

// With --allow-tool-registration: define a tool, see the list change, call it.
if (tools.some((t) => t.name === "register_tool")) {
  out.calls.register = await call("register_tool", {
    name: "shout",
    description: "Upper-case a text.",
    parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    implementation: { argv: ["/bin/sh", "-c", "tr a-z A-Z"] },
  });
  for (let i = 0; i < 100 && listChanged === 0; i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
  out.listChanged = listChanged;
  out.listedAfter = (await client.listTools()).tools.map((t) => t.name);
  out.calls.registered = await call("shout", { text: "quiet" });
}

out.protocolErrors = protocolErrors;
await client.close();
console.log(JSON.stringify(out));
