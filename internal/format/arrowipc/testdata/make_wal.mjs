// Regenerates the real MemWAL WAL entries in this directory with LanceDB.
// Usage: node make_wal.mjs OUTDIR   (LANCEDB_NODE = a directory whose
// node_modules holds @lancedb/lancedb and apache-arrow; default tools/lancedb).
// Three writer sessions of one mergeInsert each leave data
// entries at WAL positions 1, 3, 5 and fence sentinels at 2 and 4.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import url from "node:url";

const here = path.dirname(url.fileURLToPath(import.meta.url));
const bases = [process.env.LANCEDB_NODE, path.resolve(here, "../../../../tools/lancedb")].filter(Boolean);
const base = bases.find((b) => fs.existsSync(path.join(b, "node_modules/@lancedb/lancedb")));
if (!base) throw new Error("no @lancedb/lancedb under " + bases.join(", "));
const require = createRequire(path.join(base, "package.json"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

const out = process.argv[2] || here;
const work = fs.mkdtempSync(path.join(process.env.TMPDIR || "/tmp", "lancewal-"));
const db = await lancedb.connect(work);
const F = (n, t, nullable = true) => new arrow.Field(n, t, nullable);
const schema = new arrow.Schema([
  F("id", new arrow.Int64(), false),
  F("s", new arrow.Utf8()),
  F("v", new arrow.Float64()),
  F("n", new arrow.Int32()),
  F("ok", new arrow.Bool()),
  F("ts", new arrow.TimestampMicrosecond()),
  F("vec", new arrow.FixedSizeList(4, F("item", new arrow.Float32()))),
  F("tags", new arrow.List(F("item", new arrow.Utf8()))),
]);
// row(i, g): generation g's version of row i; some nulls so validity shows.
const row = (i, g) => ({
  id: BigInt(i),
  s: i % 7 === 3 ? null : `g${g}-${i}`,
  v: i * 0.5 + g,
  n: i % 5 === 0 ? null : i * 10 + g,
  ok: (i + g) % 2 === 0,
  ts: 1700000000000000 + i * 1000 + g,
  vec: i % 11 === 4 ? null : [i, i + 0.25, g, -i],
  tags: i % 6 === 1 ? null : Array.from({ length: i % 3 }, (_, k) => `t${k}`),
});
const mk = (ids, g) => lancedb.makeArrowTable(ids.map((i) => row(i, g)), { schema });

const t = await db.createTable("w", mk([...Array(20).keys()], 0));
await t.setUnenforcedPrimaryKey("id");
await t.setLsmWriteSpec({ specType: "unsharded", maintainedIndexes: [] });
const batches = [];
for (let g = 1; g <= 3; g++) {
  const ids = Array.from({ length: 8 }, (_, k) => k * 3 + g); // updates and inserts
  batches.push({ g, ids });
  await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(mk(ids, g));
  await t.closeLsmWriters();
}
const mw = path.join(work, "w.lance", "_mem_wal");
const shard = fs.readdirSync(mw)[0];
const wal = path.join(mw, shard, "wal");
const names = fs.readdirSync(wal).sort((a, b) => posOf(a) - posOf(b));
// posOf decodes the LSB-first binary name back to the WAL position.
function posOf(n) {
  const b = n.replace(".arrow", "");
  let v = 0n;
  for (let i = 0; i < b.length; i++) if (b[i] === "1") v |= 1n << BigInt(i);
  return Number(v);
}
const expected = [];
for (const n of names) {
  const p = posOf(n);
  const dst = `wal_${p}.arrow`;
  fs.copyFileSync(path.join(wal, n), path.join(out, dst));
  const tbl = arrow.tableFromIPC(fs.readFileSync(path.join(wal, n)));
  expected.push({ file: dst, name: n, position: p, metadata: Object.fromEntries(tbl.schema.metadata), columns: tbl.schema.fields.map((f) => f.name + ":" + String(f.type)), rows: tbl.numRows, batches: tbl.batches.length });
}
fs.writeFileSync(path.join(out, "wal_expected.json"), JSON.stringify({ shard, generations: batches, row: row.toString(), entries: expected }, null, 1) + "\n");
console.log(JSON.stringify(expected, null, 1));
fs.rmSync(work, { recursive: true });
