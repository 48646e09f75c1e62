// The compaction benchmark's LanceDB side (TestBenchCompaction).
//
//   node bench_compact.mjs build    DB TABLE ROWS FRAGROWS DELETE [SHAPE]  build TABLE, one JSON line
//   node bench_compact.mjs optimize DB TABLE                       time LanceDB's optimize() of TABLE, one JSON line
//   node bench_compact.mjs digest   DB TABLE                       an order-independent digest of TABLE
//
// build creates TABLE of ROWS rows (id int64 0..ROWS-1, s utf8, cat int32,
// f float64), one fragment per FRAGROWS rows (one add each), then, when
// DELETE is not 0, deletes the rows with id % DELETE = 3 (1/DELETE of every
// fragment). SHAPE, a comma-separated list, adds to that: vec (a column
// vec FixedSizeList<float32, 8>, values derived from id), btree (a btree
// on id), bitmap (a bitmap on cat), ivfpq (vec and an IVF_PQ index on
// it: 64 partitions, 4 sub-vectors); the indexes are built before the
// deletes, so they cover every fragment. wide makes the table id and vec
// FixedSizeList<float32, 768> only (an embedding table: LanceDB writes
// its vector pages full-zip); with ivfpq, the IVF_PQ index on that vec
// has 16 partitions and 16 sub-vectors; with nulls, vec is null where
// id % 13 = 5. optimize runs in a process of its
// own, so its CPU time and peak RSS are the optimize's alone (timed around
// the optimize() call: not Node's start-up nor the table's open).
//
// LanceDB is found through $LANCEDB_NODE_MODULES, as oracle.mjs does.

import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const require = createRequire(path.join(process.env.LANCEDB_NODE_MODULES, "..", "package.json"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

const baseFields = [
  new arrow.Field("id", new arrow.Int64(), false),
  new arrow.Field("s", new arrow.Utf8(), true),
  new arrow.Field("cat", new arrow.Int32(), true),
  new arrow.Field("f", new arrow.Float64(), true),
];
let vecDim = 8;
let vecType = new arrow.FixedSizeList(vecDim, new arrow.Field("item", new arrow.Float32(), true));
let schema = new arrow.Schema(baseFields);
let withVec = false;
let wide = false;
let vecNulls = false;

// wideBatch builds rows of the wide shape: id and a 768-d vector derived
// from id (a hash: distinct vectors that do not compress).
function wideBatch(ids) {
  const n = ids.length;
  const v = new Float32Array(n * vecDim);
  for (let i = 0; i < n; i++) {
    let x = Number(ids[i] % 4294967296n) >>> 0;
    for (let k = 0; k < vecDim; k++) {
      x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + k) >>> 0;
      x = (x ^ (x >>> 13)) >>> 0;
      v[i * vecDim + k] = x / 4294967296 - 0.5;
    }
  }
  const items = arrow.makeData({ type: new arrow.Float32(), length: n * vecDim, nullCount: 0, data: v });
  let nullBitmap;
  let nullCount = 0;
  if (vecNulls) {
    nullBitmap = new Uint8Array((n + 7) >> 3);
    for (let i = 0; i < n; i++) {
      if (ids[i] % 13n === 5n) nullCount++;
      else nullBitmap[i >> 3] |= 1 << (i & 7);
    }
  }
  const children = [
    arrow.makeData({ type: new arrow.Int64(), length: n, nullCount: 0, data: ids }),
    arrow.makeData({ type: vecType, length: n, nullCount, nullBitmap, child: items }),
  ];
  const struct = arrow.makeData({ type: new arrow.Struct(schema.fields), length: n, nullCount: 0, children });
  return new arrow.RecordBatch(schema, struct);
}

// batch builds rows for ids (a BigInt64Array) with s = prefix + id.
function batch(ids, prefix) {
  if (wide) return wideBatch(ids);
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
  if (withVec) {
    const v = new Float32Array(n * vecDim);
    for (let i = 0; i < n; i++) {
      const x = Number(ids[i]);
      for (let k = 0; k < vecDim; k++) v[i * vecDim + k] = ((x * 2654435761 + k * 40503) % 1000003) / 1000003;
    }
    const items = arrow.makeData({ type: new arrow.Float32(), length: n * vecDim, nullCount: 0, data: v });
    children.push(arrow.makeData({ type: vecType, length: n, nullCount: 0, child: items }));
  }
  const struct = arrow.makeData({ type: new arrow.Struct(schema.fields), length: n, nullCount: 0, children });
  return new arrow.RecordBatch(schema, struct);
}

function range(lo, hi) {
  const a = new BigInt64Array(hi - lo);
  for (let i = 0; i < a.length; i++) a[i] = BigInt(lo + i);
  return a;
}

// The peak RSS is VmHWM of /proc/self/status: getrusage's maxRSS of a
// process started by a Go test carries the test's own peak (Linux keeps the
// parent's high-water mark across fork and exec).
function usage() {
  const u = process.resourceUsage();
  const m = /^VmHWM:\s*(\d+) kB$/m.exec(fs.readFileSync("/proc/self/status", "utf8"));
  return { cpuMs: (u.userCPUTime + u.systemCPUTime) / 1000, maxRssKb: m ? Number(m[1]) : u.maxRSS };
}

async function build(db, name, rows, fragRows, del, shape) {
  const want = new Set((shape || "").split(",").filter((x) => x));
  wide = want.has("wide");
  vecNulls = want.has("nulls");
  withVec = wide || want.has("vec") || want.has("ivfpq");
  if (wide) {
    vecDim = 768;
    vecType = new arrow.FixedSizeList(vecDim, new arrow.Field("item", new arrow.Float32(), true));
    schema = new arrow.Schema([baseFields[0], new arrow.Field("vec", vecType, true)]);
  } else schema = new arrow.Schema(withVec ? [...baseFields, new arrow.Field("vec", vecType, true)] : baseFields);
  const t0 = Date.now();
  let t = null;
  for (let lo = 0; lo < rows; lo += fragRows) {
    // One add per fragment; the wide shape's in batches of at most 64 Ki
    // rows (192 MiB of vectors).
    const bs = [];
    const hi = Math.min(rows, lo + fragRows);
    const step = wide ? 65536 : fragRows;
    for (let a = lo; a < hi; a += step) bs.push(batch(range(a, Math.min(hi, a + step)), "b"));
    const tb = new arrow.Table(bs);
    if (t === null) t = await db.createTable(name, tb, { mode: "create" });
    else await t.add(tb);
  }
  if (want.has("btree")) await t.createIndex("id", { config: lancedb.Index.btree() });
  if (want.has("bitmap")) await t.createIndex("cat", { config: lancedb.Index.bitmap() });
  // 64 partitions of 4 sub-vectors of 2 floats: a quick k-means even at
  // 16 Mi rows, partitions of ~256 Ki rows there.
  if (want.has("ivfpq") && wide)
    await t.createIndex("vec", { config: lancedb.Index.ivfPq({ numPartitions: 16, numSubVectors: 16, distanceType: "l2" }) });
  else if (want.has("ivfpq"))
    await t.createIndex("vec", { config: lancedb.Index.ivfPq({ numPartitions: 64, numSubVectors: 4, distanceType: "l2" }) });
  if (del > 0) await t.delete(`id % ${del} = 3`);
  const count = await t.countRows();
  const version = await t.version();
  t.close();
  return { buildMs: Date.now() - t0, count, version };
}

async function optimize(db, name) {
  const t = await db.openTable(name);
  const before = usage();
  const t0 = Date.now();
  const r = await t.optimize();
  const wallMs = Date.now() - t0;
  const after = usage();
  const count = await t.countRows();
  t.close();
  return { wallMs, cpuMs: after.cpuMs - before.cpuMs, maxRssKb: after.maxRssKb, count, compaction: r.compaction };
}

// digest: count, the sum of ids and a sum of per-row hashes of (id, s)
// and of vec's bits when the table has them, over the base view (no
// LSM): equal for equal sets of rows.
async function digest(db, name) {
  const t = await db.openTable(name);
  let count = 0;
  let idSum = 0n;
  let h = 0n;
  const mask = (1n << 64n) - 1n;
  const names = (await t.schema()).fields.map((f) => f.name);
  const cols = ["id", "s", "vec"].filter((c) => names.includes(c));
  const stream = await t.query().select(cols).toArrow();
  for (const b of stream.batches) {
    const ids = b.getChild("id").data[0];
    const s = cols.includes("s") ? b.getChild("s").data[0] : null;
    const vec = cols.includes("vec") ? b.getChild("vec").data[0] : null;
    const iv = ids.values;
    const off = s && s.valueOffsets;
    const sv = s && s.values;
    let vb = null;
    let dim = 0;
    if (vec) {
      const items = vec.children[0];
      dim = vec.type.listSize;
      vb = new Uint32Array(items.values.buffer, items.values.byteOffset, items.values.length);
    }
    for (let i = 0; i < b.numRows; i++) {
      const id = iv[ids.offset + i];
      let x = 2166136261;
      if (s) for (let k = off[s.offset + i]; k < off[s.offset + i + 1]; k++) x = Math.imul(x ^ sv[k], 16777619) >>> 0;
      if (vb && !b.getChild("vec").isValid(i)) x = Math.imul(x ^ 0x6e756c6c, 16777619) >>> 0;
      else if (vb) {
        const at = (vec.offset + i) * dim + vec.children[0].offset;
        for (let k = 0; k < dim; k++) x = Math.imul(x ^ vb[at + k], 16777619) >>> 0;
      }
      idSum += id;
      h = (h + ((BigInt(x) << 32n) ^ BigInt.asUintN(64, id) * 0x9e3779b97f4a7c15n)) & mask;
      count++;
    }
  }
  t.close();
  return { count, idSum: idSum.toString(), hash: h.toString() };
}

const [mode, dbDir, a, b, c, d] = process.argv.slice(2);
const db = await lancedb.connect(dbDir);
let out;
if (mode === "build") out = await build(db, a, Number(b), Number(c), Number(d), process.argv[8]);
else if (mode === "optimize") out = await optimize(db, a);
else if (mode === "digest") out = await digest(db, a);
else throw new Error(`unknown mode ${mode}`);
await new Promise((resolve) => process.stdout.write(JSON.stringify(out) + "\n", resolve));
process.exit(0);
