// parse.mjs reads a JSON array of Mermaid diagrams on stdin and parses each
// with Mermaid's own parser, headless: jsdom stands in for the browser that
// Mermaid's sanitizer expects, and nothing is rendered. It prints one line a
// diagram, "ok <index> <type>" or "error <index>: <message>", and exits 1
// when any failed (docs/concepts_test.go runs it).
import { JSDOM } from 'jsdom';

const dom = new JSDOM('<!doctype html><html><body></body></html>');
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import('mermaid');
mermaid.initialize({ startOnLoad: false });

let input = '';
for await (const chunk of process.stdin) input += chunk;
let failed = 0;
for (const [i, diagram] of JSON.parse(input).entries()) {
  try {
    const parsed = await mermaid.parse(diagram);
    console.log(`ok ${i} ${parsed.diagramType}`);
  } catch (err) {
    failed++;
    console.log(`error ${i}: ${String(err?.message ?? err).split('\n').join(' | ')}`);
  }
}
process.exit(failed ? 1 : 0);
