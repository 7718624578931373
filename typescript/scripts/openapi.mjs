// The API's types, generated from the server's own description (docs/openapi.json) by
// openapi-typescript: `npm run openapi` writes src/openapi.ts; `--check` (run by `npm test`)
// fails when the file is not what the description gives, so the SDK and the server cannot drift.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import openapiTS, { astToString } from "openapi-typescript";

const here = dirname(fileURLToPath(import.meta.url));
const spec = join(here, "..", "..", "docs", "openapi.json");
const out = join(here, "..", "src", "openapi.ts");
const head =
  "// Generated from docs/openapi.json by scripts/openapi.mjs (`npm run openapi`). Do not edit.\n" +
  "/* eslint-disable */\n";
// A key with a default is optional in a request (the server fills it in).
const ast = await openapiTS(JSON.parse(readFileSync(spec, "utf8")), { defaultNonNullable: false });
const text = head + astToString(ast);
if (process.argv.includes("--check")) {
  let old = "";
  try {
    old = readFileSync(out, "utf8");
  } catch {}
  if (old !== text) {
    console.error(`${out} is not what ${spec} gives: run \`npm run openapi\` and commit it`);
    process.exit(1);
  }
  console.log(`src/openapi.ts matches docs/openapi.json`);
} else {
  writeFileSync(out, text);
  console.log(`wrote ${out}`);
}
