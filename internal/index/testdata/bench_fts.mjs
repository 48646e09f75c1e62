// The full-text catch-up benchmark's LanceDB side (TestBenchFullTextCatchUp).
//
//   node bench_fts.mjs build    DB TABLE BASE NEW WORDS   build TABLE, one JSON line
//   node bench_fts.mjs optimize DB TABLE                  time LanceDB's optimize() of TABLE, one JSON line
//
// build creates TABLE (id int64, doc utf8) with BASE docs in one add (one
// fragment when BASE <= 1 Mi rows), a full-text index on doc (simple
// tokenizer, lower_case, no stemming, no stop words, no ASCII folding:
// a configuration compactord reproduces), then adds NEW docs in one more
// fragment, which the index does not cover. Each doc is WORDS words drawn
// from a 50 000-word vocabulary with a Zipf-like (log-uniform rank)
// distribution, from a fixed seed. optimize runs in a process of its own,
// timed around the optimize() call (not Node's start-up nor the table's
// open): with a base fragment of 1 Mi rows compaction finds nothing to do,
// so the call is the index step (a new partition over the new fragment).
//
// LanceDB is found through $LANCEDB_NODE_MODULES, as oracle.mjs does.

import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const require = createRequire(path.join(process.env.LANCEDB_NODE_MODULES, "..", "package.json"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

const schema = new arrow.Schema([new arrow.Field("id", new arrow.Int64(), false), new arrow.Field("doc", new arrow.Utf8(), true)]);
const vocab = 50000;

// mulberry32: a small deterministic PRNG.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function word(r) {
  const rank = Math.floor(Math.exp(r() * Math.log(vocab))) - 1;
  return "w" + rank.toString(36);
}

// batch builds docs lo..hi-1.
function batch(lo, hi, words, r) {
  const n = hi - lo;
  const enc = new TextEncoder();
  const offsets = new Int32Array(n + 1);
  const parts = new Array(n);
  let total = 0;
  for (let i = 0; i < n; i++) {
    const ws = new Array(words);
    for (let k = 0; k < words; k++) ws[k] = word(r);
    parts[i] = enc.encode(ws.join(" "));
    total += parts[i].length;
    offsets[i + 1] = total;
  }
  const data = new Uint8Array(total);
  for (let i = 0; i < n; i++) data.set(parts[i], offsets[i]);
  const ids = new BigInt64Array(n);
  for (let i = 0; i < n; i++) ids[i] = BigInt(lo + i);
  const children = [
    arrow.makeData({ type: new arrow.Int64(), length: n, nullCount: 0, data: ids }),
    arrow.makeData({ type: new arrow.Utf8(), length: n, nullCount: 0, valueOffsets: offsets, data }),
  ];
  const struct = arrow.makeData({ type: new arrow.Struct(schema.fields), length: n, nullCount: 0, children });
  return new arrow.RecordBatch(schema, struct);
}

function batches(lo, hi, words, r) {
  const out = [];
  for (let b = lo; b < hi; b += 65536) out.push(batch(b, Math.min(hi, b + 65536), words, r));
  return new arrow.Table(out);
}

function usage() {
  const u = process.resourceUsage();
  const m = /^VmHWM:\s*(\d+) kB$/m.exec(fs.readFileSync("/proc/self/status", "utf8"));
  return { cpuMs: (u.userCPUTime + u.systemCPUTime) / 1000, maxRssKb: m ? Number(m[1]) : u.maxRSS };
}

async function build(db, name, base, extra, words) {
  const r = rng(12345);
  const t0 = Date.now();
  const t = await db.createTable(name, batches(0, base, words, r), { mode: "create" });
  const ti = Date.now();
  await t.createIndex("doc", {
    config: lancedb.Index.fts({ baseTokenizer: "simple", lowercase: true, stem: false, removeStopWords: false, asciiFolding: false }),
    name: "doc_idx",
  });
  const indexMs = Date.now() - ti;
  await t.add(batches(base, base + extra, words, r));
  const count = await t.countRows();
  t.close();
  return { buildMs: Date.now() - t0, indexMs, count };
}

async function optimize(db, name) {
  const t = await db.openTable(name);
  const before = usage();
  const t0 = Date.now();
  const r = await t.optimize();
  const wallMs = Date.now() - t0;
  const after = usage();
  const stats = await t.indexStats("doc_idx");
  t.close();
  return { wallMs, cpuMs: after.cpuMs - before.cpuMs, maxRssKb: after.maxRssKb, unindexed: stats.numUnindexedRows, compaction: r.compaction };
}

const [mode, dbDir, a, b, c, d] = process.argv.slice(2);
const db = await lancedb.connect(dbDir);
let out;
if (mode === "build") out = await build(db, a, Number(b), Number(c), Number(d));
else if (mode === "optimize") out = await optimize(db, a);
else throw new Error(`unknown mode ${mode}`);
await new Promise((resolve) => process.stdout.write(JSON.stringify(out) + "\n", resolve));
process.exit(0);
