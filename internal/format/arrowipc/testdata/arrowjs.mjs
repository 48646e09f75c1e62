// Test helper: reads Arrow IPC streams/files with apache-arrow (JS) and prints
// each column's raw layout as JSON, so the Go tests can compare what JS sees
// with what the Go codec wrote. `node arrowjs.mjs dict OUT` writes a
// dictionary-encoded stream with apache-arrow for the Go reader to decode.
// ARROW_JS_MODULES = the node_modules directory holding apache-arrow.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const require = createRequire(path.join(process.env.ARROW_JS_MODULES, "x.js"));
const arrow = require("apache-arrow");

const hex = (u8) => Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength).toString("hex");
function bits(bm, off, n) {
  const out = [];
  for (let i = off; i < off + n; i++) out.push((bm[i >> 3] >> (i & 7)) & 1);
  return out;
}
function dump(d) {
  const o = { type: String(d.type), length: d.length, nulls: d.nullCount };
  if (d.nullCount > 0 && d.nullBitmap && d.nullBitmap.length) o.valid = bits(d.nullBitmap, d.offset, d.length);
  const t = d.type;
  if (arrow.DataType.isBool(t)) o.values = bits(d.values, d.offset, d.length).join("");
  else if (d.valueOffsets) {
    const off = d.valueOffsets.subarray(d.offset, d.offset + d.length + 1);
    o.offsets = Array.from(off, String);
    if (!arrow.DataType.isList(t) && d.values) o.values = hex(d.values.subarray(Number(off[0]), Number(off[off.length - 1])));
  } else if (d.values && d.values.length && !arrow.DataType.isFixedSizeList(t) && !arrow.DataType.isStruct(t)) {
    const s = d.stride;
    o.values = hex(d.values.subarray(d.offset * s, (d.offset + d.length) * s));
  }
  if (d.dictionary) o.dict = d.dictionary.data.map(dump);
  if (d.children && d.children.length) o.children = d.children.map(dump);
  return o;
}

const [mode, ...args] = process.argv.slice(2);
if (mode === "dump") {
  const res = args.map((f) => {
    const t = arrow.tableFromIPC(fs.readFileSync(f));
    return {
      metadata: Object.fromEntries(t.schema.metadata),
      fields: t.schema.fields.map((f) => ({ name: f.name, type: String(f.type), nullable: f.nullable, metadata: Object.fromEntries(f.metadata) })),
      batches: t.batches.map((b) => b.data.children.map(dump)),
    };
  });
  console.log(JSON.stringify(res));
} else if (mode === "dict") {
  const vals = ["a", "bb", null, "a", "ccc", "bb", "a"];
  const v = arrow.vectorFromArray(vals, new arrow.Dictionary(new arrow.Utf8(), new arrow.Int16()));
  const n = arrow.vectorFromArray([1, 2, 3, 4, 5, 6, 7], new arrow.Int32());
  const t = new arrow.Table({ d: v, n });
  fs.writeFileSync(args[0], arrow.tableToIPC(t, "stream"));
  fs.writeFileSync(args[0].replace(/\.arrow$/, ".file.arrow"), arrow.tableToIPC(t, "file"));
} else throw new Error("mode: dump FILE... | dict OUT");
