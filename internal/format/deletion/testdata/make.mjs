// Regenerates the real deletion files in this directory with LanceDB.
// Usage: node make.mjs OUTDIR   (LANCEDB_NODE = a directory whose node_modules
// holds @lancedb/lancedb and apache-arrow; default tools/lancedb).
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
const work = fs.mkdtempSync(path.join(process.env.TMPDIR || "/tmp", "lancedel-"));
const db = await lancedb.connect(work);
const schema = new arrow.Schema([new arrow.Field("id", new arrow.Int64(), false)]);
const rows = (lo, hi) => lancedb.makeArrowTable(Array.from({ length: hi - lo }, (_, i) => ({ id: BigInt(lo + i) })), { schema });

// deleted returns, per fragment, the offsets LanceDB no longer returns.
async function deleted(t, physical) {
  const live = new Map();
  for (const r of await t.query().withRowId().select(["id"]).toArray()) {
    const a = BigInt(r._rowid);
    const f = Number(a >> 32n), o = Number(a & 0xffffffffn);
    if (!live.has(f)) live.set(f, new Set());
    live.get(f).add(o);
  }
  const res = {};
  for (const [f, n] of Object.entries(physical)) {
    const l = live.get(Number(f)) || new Set();
    res[f] = [];
    for (let o = 0; o < n; o++) if (!l.has(o)) res[f].push(o);
  }
  return res;
}

const expected = [];
async function record(name, t, physical) {
  const dir = path.join(work, name + ".lance", "_deletions");
  const del = await deleted(t, physical);
  for (const f of fs.readdirSync(dir).sort()) {
    const frag = f.split("-")[0];
    const st = fs.statSync(path.join(dir, f));
    expected.push({ table: name, file: f, fragment: Number(frag), physical_rows: physical[frag], bytes: st.size, deleted: del[frag] });
  }
}

// small: one fragment, five scattered deletions -> .arrow
{
  const t = await db.createTable("small", rows(0, 100));
  await t.delete("id IN (42, 7, 93, 15, 60)");
  await record("small", t, { 0: 100 });
}
// twofrag: two fragments, deletions in both (one delete call) -> two .arrow files
{
  const t = await db.createTable("twofrag", rows(0, 50));
  await t.add(rows(50, 80));
  await t.delete("id = 3 OR id = 49 OR id = 50 OR id = 79 OR id = 64");
  await record("twofrag", t, { 0: 50, 1: 30 });
}
// Threshold probes: a single delete of n rows out of 12000.
for (const n of [4999, 5000, 5001]) {
  const t = await db.createTable("thr" + n, rows(0, 12000));
  await t.delete(`id < ${n}`);
  const dir = path.join(work, "thr" + n + ".lance", "_deletions");
  console.log("threshold", n, fs.readdirSync(dir));
}
// Stepwise: 3000 then 2000 more (5000 in total) then 1 more.
{
  const t = await db.createTable("step", rows(0, 12000));
  await t.delete("id < 3000");
  await t.delete("id >= 3000 AND id < 5000");
  const dir = path.join(work, "step.lance", "_deletions");
  console.log("step 5000", fs.readdirSync(dir));
  await t.delete("id = 5000");
  console.log("step 5001", fs.readdirSync(dir));
}
// big: every third row of 15001 -> 5001 deletions -> .bin
{
  const t = await db.createTable("big", rows(0, 15001));
  await t.delete("id % 3 = 0");
  await record("big", t, { 0: 15001 });
}
// evens: every other row of 10000 -> 5000 deletions
{
  const t = await db.createTable("evens", rows(0, 10000));
  await t.delete("id % 2 = 0");
  await record("evens", t, { 0: 10000 });
}

for (const e of expected) {
  fs.copyFileSync(path.join(work, e.table + ".lance", "_deletions", e.file), path.join(out, e.table + "_" + e.file));
  e.file = e.table + "_" + e.file;
}
fs.writeFileSync(path.join(out, "expected.json"), JSON.stringify(expected, null, 1) + "\n");
console.log(expected.map((e) => `${e.file} ${e.bytes}B deleted=${e.deleted.length}`).join("\n"));
fs.rmSync(work, { recursive: true });
