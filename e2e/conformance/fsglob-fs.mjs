// fsglob-fs.mjs is node:fs with a globSync that Node 20 lacks (see fsglob.mjs).
import fs from "node:fs";

export * from "node:fs";
export default fs;

export function globSync() {
  throw new Error("fs.globSync needs Node 22 (only the conformance CLI's tier-check uses it)");
}
