// The vector index benchmark's LanceDB side (TestBenchVectorIndex).
//
//   node bench_vector.mjs gen      DB TABLE LO HI     create TABLE: rows LO..HI-1 (id int64, vec 768-d float32), one fragment
//   node bench_vector.mjs add      DB TABLE LO HI     append rows LO..HI-1 in one add (one fragment)
//   node bench_vector.mjs index    DB TABLE TYPE PARTS  build vec_idx (ivf_pq or ivf_hnsw_sq, l2, PARTS partitions or, when 0, LanceDB's choice; its other defaults)
//   node bench_vector.mjs delete   DB TABLE PRED      delete the rows PRED matches
//   node bench_vector.mjs dropindex DB TABLE          drop vec_idx
//   node bench_vector.mjs optimize DB TABLE           time LanceDB's optimize() of TABLE
//   node bench_vector.mjs stats    DB TABLE           vec_idx's indexStats, the row count and the version
//
// Each prints one JSON line. optimize is timed around the optimize() call
// inside this process (not Node's start-up nor the table's open): wall,
// the process's CPU over the call (process.resourceUsage) and its peak RSS
// (VmHWM), with vec_idx's indexStats before and after and the versions,
// so the caller can tell what optimize() did (a delta segment, a merge, a
// retrain, a compaction).
//
// Vectors are clustered, deterministic in the row id: one of 1024 centres
// (a hash of id % 1024) plus noise of a tenth of the centres' spread.
//
// LanceDB is found through $LANCEDB_NODE_MODULES, as oracle.mjs does.

import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const require = createRequire(path.join(process.env.LANCEDB_NODE_MODULES, "..", "package.json"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

const dim = 768;
const vecType = new arrow.FixedSizeList(dim, new arrow.Field("item", new arrow.Float32(), true));
const schema = new arrow.Schema([new arrow.Field("id", new arrow.Int64(), false), new arrow.Field("vec", vecType, true)]);

// rnd is a uniform [-1, 1) from a 32-bit seed (mulberry32's mix).
function rnd(seed) {
  let t = (seed + 0x6d2b79f5) | 0;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return (((t ^ (t >>> 14)) >>> 0) / 4294967296) * 2 - 1;
}

const centres = new Float32Array(1024 * dim);
for (let i = 0; i < centres.length; i++) centres[i] = rnd(i * 7919 + 17);

function batch(lo, hi) {
  const n = hi - lo;
  const ids = new BigInt64Array(n);
  const v = new Float32Array(n * dim);
  for (let i = 0; i < n; i++) {
    const id = lo + i;
    ids[i] = BigInt(id);
    const c = (id % 1024) * dim;
    const s = Math.imul(id, 0x9e3779b1);
    for (let k = 0; k < dim; k++) v[i * dim + k] = centres[c + k] + 0.1 * rnd(s + k * 0x85ebca6b);
  }
  const items = arrow.makeData({ type: new arrow.Float32(), length: n * dim, nullCount: 0, data: v });
  const children = [
    arrow.makeData({ type: new arrow.Int64(), length: n, nullCount: 0, data: ids }),
    arrow.makeData({ type: vecType, length: n, nullCount: 0, child: items }),
  ];
  const struct = arrow.makeData({ type: new arrow.Struct(schema.fields), length: n, nullCount: 0, children });
  return new arrow.RecordBatch(schema, struct);
}

function table(lo, hi) {
  const bs = [];
  for (let a = lo; a < hi; a += 65536) bs.push(batch(a, Math.min(hi, a + 65536)));
  return new arrow.Table(bs);
}

// The peak RSS is VmHWM of /proc/self/status: getrusage's maxRSS of a
// process started by a Go test carries the test's own peak (Linux keeps the
// parent's high-water mark across fork and exec).
function usage() {
  const u = process.resourceUsage();
  const m = /^VmHWM:\s*(\d+) kB$/m.exec(fs.readFileSync("/proc/self/status", "utf8"));
  return { cpuMs: (u.userCPUTime + u.systemCPUTime) / 1000, maxRssKb: m ? Number(m[1]) : u.maxRSS };
}

async function stats(t) {
  const s = await t.indexStats("vec_idx");
  return s ? { numIndices: s.numIndices, indexed: s.numIndexedRows, unindexed: s.numUnindexedRows, type: s.indexType } : null;
}

const [mode, dbDir, name, a, b] = process.argv.slice(2);
const db = await lancedb.connect(dbDir);
let out;
const t0 = Date.now();
switch (mode) {
  case "gen": {
    const t = await db.createTable(name, table(Number(a), Number(b)), { mode: "create" });
    out = { ms: Date.now() - t0, count: await t.countRows(), version: await t.version() };
    break;
  }
  case "add": {
    const t = await db.openTable(name);
    await t.add(table(Number(a), Number(b)));
    out = { ms: Date.now() - t0, count: await t.countRows(), version: await t.version() };
    break;
  }
  case "index": {
    const t = await db.openTable(name);
    const opts = { distanceType: "l2" };
    if (Number(b) > 0) opts.numPartitions = Number(b);
    const config = a === "ivf_pq" ? lancedb.Index.ivfPq(opts) : lancedb.Index.hnswSq(opts);
    await t.createIndex("vec", { config, name: "vec_idx" });
    out = { ms: Date.now() - t0, stats: await stats(t), version: await t.version() };
    break;
  }
  case "delete": {
    const t = await db.openTable(name);
    await t.delete(a);
    out = { ms: Date.now() - t0, count: await t.countRows(), version: await t.version() };
    break;
  }
  case "dropindex": {
    const t = await db.openTable(name);
    await t.dropIndex("vec_idx");
    out = { version: await t.version() };
    break;
  }
  case "optimize": {
    const t = await db.openTable(name);
    const before = { stats: await stats(t), version: await t.version() };
    const u0 = usage();
    const w0 = Date.now();
    const r = await t.optimize();
    const wallMs = Date.now() - w0;
    const u1 = usage();
    out = { wallMs, cpuMs: u1.cpuMs - u0.cpuMs, maxRssKb: u1.maxRssKb, compaction: r.compaction, before,
      after: { stats: await stats(t), version: await t.version() }, count: await t.countRows() };
    break;
  }
  case "stats": {
    const t = await db.openTable(name);
    out = { stats: await stats(t), count: await t.countRows(), version: await t.version() };
    break;
  }
  default:
    throw new Error(`unknown mode ${mode}`);
}
await new Promise((resolve) => process.stdout.write(JSON.stringify(out) + "\n", resolve));
process.exit(0);
