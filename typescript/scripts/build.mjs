// Builds dist/esm (ES modules) and dist/cjs (CommonJS), each with its type declarations, with
// TypeScript's own compiler run twice (no bundler: the sources are a handful of modules).
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
rmSync(join(root, "dist"), { recursive: true, force: true });
// The AI SDK entry (src/ai.ts) has configs of its own, which skip checking the libraries'
// declarations: `ai`'s name the DOM's types and @types/json-schema, which the core goes without.
for (const config of ["tsconfig.json", "tsconfig.cjs.json", "tsconfig.ai.json", "tsconfig.ai.cjs.json"]) {
  execFileSync(process.execPath, [tsc, "-p", join(root, config)], { stdio: "inherit", cwd: root });
}
// The package is ESM ("type": "module"): the CommonJS build says what it is.
mkdirSync(join(root, "dist", "cjs"), { recursive: true });
writeFileSync(join(root, "dist", "cjs", "package.json"), '{ "type": "commonjs" }\n');
console.log("built dist/esm and dist/cjs");
