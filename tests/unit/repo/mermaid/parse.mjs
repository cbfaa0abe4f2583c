// Mermaid's own parser over diagrams given as a JSON list of strings on stdin; prints a JSON list
// of {ok, type, error}. Usage: node parse.mjs DIR < diagrams.json, where DIR holds node_modules
// with the pinned mermaid and jsdom of package.json (make figures installs them with npm ci).
// mermaid.parse runs the diagram type's real grammar; jsdom gives DOMPurify, which mermaid
// imports for its label sanitizer, the window it needs outside a browser.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const dir = process.argv[2];
const load = (path) => import(pathToFileURL(join(dir, "node_modules", path)).href);
const { JSDOM } = await load("jsdom/lib/api.js");
const { window } = new JSDOM("");
globalThis.window = window;
globalThis.document = window.document;
const { default: mermaid } = await load("mermaid/dist/mermaid.core.mjs");

const results = [];
for (const text of JSON.parse(readFileSync(0, "utf8"))) {
  try {
    const parsed = await mermaid.parse(text);
    results.push({ ok: true, type: parsed.diagramType, error: "" });
  } catch (error) {
    results.push({ ok: false, type: "", error: String(error?.message ?? error) });
  }
}
process.stdout.write(JSON.stringify(results) + "\n");
