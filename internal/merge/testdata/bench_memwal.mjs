// The MemWAL merge benchmark's LanceDB side (TestBenchMemWALMerge).
//
//   node bench_memwal.mjs build  DB ROWS UPSERTS  build the tables, one JSON line
//   node bench_memwal.mjs plain  DB ROWS UPSERTS [TABLE]  time LanceDB's plain mergeInsert into TABLE (default plain), one JSON line
//   node bench_memwal.mjs digest DB TABLE         an order-independent digest of TABLE's base view
//   node bench_memwal.mjs gens   DB ROWS UPSERTS GENS  table "t" as build makes it (no copy), the upserts written in GENS generations
//
// build creates table "t" of ROWS rows (id int64 0..ROWS-1, s utf8, cat
// int32, f float64) in batches of 1 M rows, sets the primary key id and
// copies the table to "plain" (an identical base table), then sets an
// unsharded LSM spec on "t" and writes the UPSERTS rows through the MemWAL
// (mergeInsert of 100 000 rows at a time + closeLsmWriters). plain, in a process of its own so its
// peak RSS is the merge's alone, merge-inserts the same UPSERTS rows into
// "plain" with useLsm(false). The upserts: 80% update existing ids spread
// over the whole table (a stride through it), 20% insert new ids ≥ ROWS;
// every id once.
//
// LanceDB is found through $LANCEDB_NODE_MODULES, as oracle.mjs does.

import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const require = createRequire(path.join(process.env.LANCEDB_NODE_MODULES, "..", "package.json"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

const schema = new arrow.Schema([
  new arrow.Field("id", new arrow.Int64(), false),
  new arrow.Field("s", new arrow.Utf8(), true),
  new arrow.Field("cat", new arrow.Int32(), true),
  new arrow.Field("f", new arrow.Float64(), true),
]);

// batch builds rows for ids (a BigInt64Array) with s = prefix + id.
function batch(ids, prefix) {
  const n = ids.length;
  const enc = new TextEncoder();
  const offsets = new Int32Array(n + 1);
  const parts = new Array(n);
  let total = 0;
  for (let i = 0; i < n; i++) {
    parts[i] = enc.encode(prefix + ids[i]);
    total += parts[i].length;
    offsets[i + 1] = total;
  }
  const data = new Uint8Array(total);
  for (let i = 0; i < n; i++) data.set(parts[i], offsets[i]);
  const cat = new Int32Array(n);
  const f = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    cat[i] = Number(ids[i] % 4n);
    f[i] = Number(ids[i]) / 2;
  }
  const children = [
    arrow.makeData({ type: new arrow.Int64(), length: n, nullCount: 0, data: ids }),
    arrow.makeData({ type: new arrow.Utf8(), length: n, nullCount: 0, valueOffsets: offsets, data }),
    arrow.makeData({ type: new arrow.Int32(), length: n, nullCount: 0, data: cat }),
    arrow.makeData({ type: new arrow.Float64(), length: n, nullCount: 0, data: f }),
  ];
  const struct = arrow.makeData({ type: new arrow.Struct(schema.fields), length: n, nullCount: 0, children });
  return new arrow.RecordBatch(schema, struct);
}

function range(lo, hi) {
  const a = new BigInt64Array(hi - lo);
  for (let i = 0; i < a.length; i++) a[i] = BigInt(lo + i);
  return a;
}

// upsertIds: 80% existing ids by a stride coprime with rows (distinct,
// spread over every fragment), 20% new ids from rows up.
function upsertIds(rows, upserts) {
  const updates = Math.floor(upserts * 0.8);
  let stride = 7919; // prime
  while (rows % stride === 0) stride += 2;
  const a = new BigInt64Array(upserts);
  for (let i = 0; i < updates; i++) a[i] = BigInt((i * stride) % rows);
  for (let i = updates; i < upserts; i++) a[i] = BigInt(rows + i - updates);
  return a;
}

function upsertTable(rows, upserts) {
  // One table of several batches of at most 256 Ki rows each.
  const ids = upsertIds(rows, upserts);
  const batches = [];
  for (let lo = 0; lo < ids.length; lo += 262144) batches.push(batch(ids.subarray(lo, Math.min(ids.length, lo + 262144)), "u"));
  return new arrow.Table(batches);
}

function usage() {
  const u = process.resourceUsage();
  return { cpuMs: (u.userCPUTime + u.systemCPUTime) / 1000, maxRssKb: u.maxRSS };
}

async function build(db, rows, upserts) {
  const t0 = Date.now();
  const step = 1_000_000;
  let t = null;
  for (let lo = 0; lo < rows; lo += step) {
    const tb = new arrow.Table([batch(range(lo, Math.min(rows, lo + step)), "b")]);
    if (t === null) t = await db.createTable("t", tb, { mode: "create" });
    else await t.add(tb);
  }
  await t.setUnenforcedPrimaryKey(["id"]);
  const baseMs = Date.now() - t0;
  const baseVersion = await t.version();
  t.close();
  fs.cpSync(path.join(db.uri_, "t.lance"), path.join(db.uri_, "plain.lance"), { recursive: true });
  t = await db.openTable("t");
  await t.setLsmWriteSpec({ specType: "unsharded", maintainedIndexes: [] });
  // One write per 100 000 rows: LanceDB never splits a write across
  // memtables, and its default max_memtable_rows is 100 000, so the
  // writer flushes a generation as each memtable fills.
  const ids = upsertIds(rows, upserts);
  const t1 = Date.now();
  for (let lo = 0; lo < ids.length; lo += 100000) {
    const part = new arrow.Table([batch(ids.subarray(lo, Math.min(ids.length, lo + 100000)), "u")]);
    await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(part);
  }
  await t.closeLsmWriters();
  const memwalMs = Date.now() - t1;
  const version = await t.version();
  t.close();
  return { baseMs, baseVersion, memwalMs, version };
}

// gens: table "t" of ROWS rows as build makes it, then the same UPSERTS
// rows written through the MemWAL in GENS generations of equal size (one
// mergeInsert and closeLsmWriters each), so the merge sees the same bytes
// whatever GENS is.
async function gens(db, rows, upserts, n) {
  const step = 1_000_000;
  let t = null;
  for (let lo = 0; lo < rows; lo += step) {
    const tb = new arrow.Table([batch(range(lo, Math.min(rows, lo + step)), "b")]);
    if (t === null) t = await db.createTable("t", tb, { mode: "create" });
    else await t.add(tb);
  }
  await t.setUnenforcedPrimaryKey(["id"]);
  await t.setLsmWriteSpec({ specType: "unsharded", maintainedIndexes: [] });
  const ids = upsertIds(rows, upserts);
  const per = Math.ceil(ids.length / n);
  const t1 = Date.now();
  for (let lo = 0; lo < ids.length; lo += per) {
    const part = new arrow.Table([batch(ids.subarray(lo, Math.min(ids.length, lo + per)), "u")]);
    await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(part);
    await t.closeLsmWriters();
  }
  const memwalMs = Date.now() - t1;
  t.close();
  return { memwalMs };
}

async function plain(db, rows, upserts, name) {
  const t = await db.openTable(name || "plain");
  const up = upsertTable(rows, upserts);
  const before = usage();
  const t0 = Date.now();
  const r = await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().useLsm(false).execute(up);
  const wallMs = Date.now() - t0;
  const after = usage();
  const count = await t.countRows();
  t.close();
  return {
    wallMs,
    cpuMs: after.cpuMs - before.cpuMs,
    maxRssKb: after.maxRssKb,
    inserted: r.numInsertedRows,
    updated: r.numUpdatedRows,
    count,
  };
}

// digest: count, the sum of ids and a sum of per-row hashes of (id, s),
// over the base view (no LSM): equal for equal sets of rows.
async function digest(db, name) {
  const t = await db.openTable(name);
  let count = 0;
  let idSum = 0n;
  let h = 0n;
  const mask = (1n << 64n) - 1n;
  const stream = await t.query().useLsm(false).select(["id", "s"]).toArrow();
  for (const b of stream.batches) {
    const ids = b.getChild("id").data[0];
    const s = b.getChild("s").data[0];
    const iv = ids.values;
    const off = s.valueOffsets;
    const sv = s.values;
    for (let i = 0; i < b.numRows; i++) {
      const id = iv[ids.offset + i];
      let x = 2166136261;
      for (let k = off[s.offset + i]; k < off[s.offset + i + 1]; k++) x = Math.imul(x ^ sv[k], 16777619) >>> 0;
      idSum += id;
      h = (h + ((BigInt(x) << 32n) ^ BigInt.asUintN(64, id) * 0x9e3779b97f4a7c15n)) & mask;
      count++;
    }
  }
  t.close();
  return { count, idSum: idSum.toString(), hash: h.toString() };
}

const [mode, dbDir, a, b, c] = process.argv.slice(2);
const db = await lancedb.connect(dbDir);
db.uri_ = dbDir;
let out;
if (mode === "build") out = await build(db, Number(a), Number(b));
else if (mode === "plain") out = await plain(db, Number(a), Number(b), c);
else if (mode === "digest") out = await digest(db, a);
else if (mode === "gens") out = await gens(db, Number(a), Number(b), Number(c));
else throw new Error(`unknown mode ${mode}`);
await new Promise((resolve) => process.stdout.write(JSON.stringify(out) + "\n", resolve));
process.exit(0);
