// fsglob-hooks.mjs is the resolve hook fsglob.mjs registers: "fs" imported
// from the conformance package resolves to fsglob-fs.mjs.
const shim = new URL("./fsglob-fs.mjs", import.meta.url).href;

export async function resolve(specifier, context, next) {
  if ((specifier === "fs" || specifier === "node:fs") &&
      context.parentURL?.includes("/@modelcontextprotocol/conformance/")) {
    return { url: shim, shortCircuit: true };
  }
  return next(specifier, context);
}
