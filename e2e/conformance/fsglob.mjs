// fsglob.mjs lets the pinned conformance CLI (0.1.16, built for Node 22) start
// on Node 20, the Node this project's machines have: the CLI imports
// fs.globSync, which Node 20 lacks, though only its tier-check command calls
// it. Loaded with `node --import ./fsglob.mjs`, this registers a resolve hook
// that gives the CLI's bundle (and only it) a module with all of node:fs plus
// a globSync that says it is missing. Nothing changes on a Node that has
// fs.globSync.
import fs from "node:fs";
import { register } from "node:module";

if (typeof fs.globSync !== "function") {
  register("./fsglob-hooks.mjs", import.meta.url);
}
