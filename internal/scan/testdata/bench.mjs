// node bench.mjs DIR ROWS: LanceDB 0.39 writes one table per column type
// (DIR/<type>.lance, ROWS rows, default encodings, file format 2.2) and
// reads it back to Arrow, printing one JSON line per type with the times
// (write: createTable with the data; read: query().toArrow()) and the data
// file. bench_lancedb_test.go runs it once per trial, between its own Go
// trials on the same files. Needs LANCEDB_NODE_MODULES (see oracle.mjs).
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(path.join(process.env.LANCEDB_NODE_MODULES, "..", "package.json"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

const [dir, rowsArg] = process.argv.slice(2);
const n = Number(rowsArg || 500000);
let seed = 12345;
const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const words = Array.from({ length: 10 }, (_, i) => `category-${i}`);

function col(type) {
  switch (type) {
    case "i64": return [new arrow.Int64(), arrow.makeData({ type: new arrow.Int64(), length: n, data: BigInt64Array.from({ length: n }, () => BigInt(Math.floor(rnd() * 2 ** 52))) })];
    case "i64_seq": return [new arrow.Int64(), arrow.makeData({ type: new arrow.Int64(), length: n, data: BigInt64Array.from({ length: n }, (_, i) => BigInt(i)) })];
    case "f64": return [new arrow.Float64(), arrow.makeData({ type: new arrow.Float64(), length: n, data: Float64Array.from({ length: n }, () => rnd() * 1e6) })];
    case "f32": return [new arrow.Float32(), arrow.makeData({ type: new arrow.Float32(), length: n, data: Float32Array.from({ length: n }, () => rnd()) })];
    case "bool": {
      const bits = new Uint8Array((n + 7) >> 3);
      for (let i = 0; i < n; i++) if (rnd() < 0.5) bits[i >> 3] |= 1 << (i & 7);
      return [new arrow.Bool(), arrow.makeData({ type: new arrow.Bool(), length: n, data: bits })];
    }
    case "ts_us": return [new arrow.TimestampMicrosecond(), arrow.makeData({ type: new arrow.TimestampMicrosecond(), length: n, data: BigInt64Array.from({ length: n }, (_, i) => 1700000000000000n + BigInt(i) * 1000n + BigInt(Math.floor(rnd() * 1000))) })];
    case "utf8":
    case "utf8_low": {
      const enc = new TextEncoder();
      const parts = [];
      for (let i = 0; i < n; i++) {
        if (type === "utf8_low") parts.push(enc.encode(words[Math.floor(rnd() * words.length)]));
        else parts.push(enc.encode(Math.floor(rnd() * 2 ** 52).toString(36) + "-" + i.toString(16)));
      }
      const offsets = new Int32Array(n + 1);
      parts.forEach((p, i) => (offsets[i + 1] = offsets[i] + p.length));
      const data = new Uint8Array(offsets[n]);
      parts.forEach((p, i) => data.set(p, offsets[i]));
      return [new arrow.Utf8(), arrow.makeData({ type: new arrow.Utf8(), length: n, valueOffsets: offsets, data })];
    }
    case "vec8": {
      const t = new arrow.FixedSizeList(8, new arrow.Field("item", new arrow.Float32(), true));
      const child = arrow.makeData({ type: new arrow.Float32(), length: n * 8, data: Float32Array.from({ length: n * 8 }, () => rnd()) });
      return [t, arrow.makeData({ type: t, length: n, child })];
    }
    case "list_i32": {
      const t = new arrow.List(new arrow.Field("item", new arrow.Int32(), true));
      const offsets = new Int32Array(n + 1);
      for (let i = 0; i < n; i++) offsets[i + 1] = offsets[i] + Math.floor(rnd() * 5);
      const child = arrow.makeData({ type: new arrow.Int32(), length: offsets[n], data: Int32Array.from({ length: offsets[n] }, () => Math.floor(rnd() * 1000)) });
      return [t, arrow.makeData({ type: t, length: n, valueOffsets: offsets, child })];
    }
  }
  throw new Error(type);
}

const types = ["i64", "i64_seq", "f64", "f32", "bool", "ts_us", "utf8", "utf8_low", "vec8", "list_i32"];
fs.mkdirSync(dir, { recursive: true });
const db = await lancedb.connect(dir);
for (const type of types) {
  const [t, data] = col(type);
  const fields = [new arrow.Field("c", t, false)];
  const table = new arrow.Table([new arrow.RecordBatch(new arrow.Schema(fields), arrow.makeData({ type: new arrow.Struct(fields), length: n, nullCount: 0, children: [data] }))]);
  let t0 = process.hrtime.bigint();
  const tb = await db.createTable(type, table, { mode: "overwrite", storageOptions: { new_table_data_storage_version: "2.2" } });
  const writeMs = Number(process.hrtime.bigint() - t0) / 1e6;
  t0 = process.hrtime.bigint();
  const back = await tb.query().toArrow();
  const readMs = Number(process.hrtime.bigint() - t0) / 1e6;
  if (back.numRows !== n) throw new Error(`${type}: read ${back.numRows} rows`);
  const versions = await tb.listVersions();
  const ddir = path.join(dir, `${type}.lance`, "data");
  // The newest data file is this trial's (overwrite keeps the old ones).
  const files = fs.readdirSync(ddir).map((f) => ({ f, m: fs.statSync(path.join(ddir, f)).mtimeMs })).sort((a, b) => b.m - a.m);
  const file = path.join(ddir, files[0].f);
  console.log(JSON.stringify({ type, writeMs, readMs, file, size: fs.statSync(file).size, rows: n, version: versions.length }));
  tb.close();
}
process.exit(0);
