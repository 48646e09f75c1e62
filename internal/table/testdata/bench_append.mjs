// The append benchmark's LanceDB side (TestBenchAppendGrowth).
//
//   node bench_append.mjs DB TABLE JSONL   append the rows of JSONL to TABLE, one JSON line out
//
// JSONL holds the rows compactord's `table append` reads (id int64, cat
// utf8, val float64, at timestamp in microseconds, one JSON object a line).
// They are parsed into one Arrow table of TABLE's schema and added with
// Table.add, as a LanceDB application appending those rows would.
//
// The costs are split so the comparison can leave Node out: startup (the
// process up to LanceDB's module loaded: wall since the process began, CPU
// and peak RSS at that point), parse (reading JSONL into Arrow: JavaScript,
// not LanceDB) and add (connect, open and Table.add: LanceDB's own work).
// maxRssKb is the process's peak RSS (VmHWM), Node's baseline included.
//
// LanceDB is found through $LANCEDB_NODE_MODULES, as oracle.mjs does.

import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";

const require = createRequire(path.join(process.env.LANCEDB_NODE_MODULES, "..", "package.json"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

// usage is the process's wall time since it began, its CPU time and its
// peak RSS so far. The peak is VmHWM of /proc/self/status, not
// resourceUsage().maxRSS: Linux carries a parent's peak across fork and
// exec into the child's getrusage, so a child of a large test process
// would report the parent's peak.
function usage() {
  const u = process.resourceUsage();
  const m = /^VmHWM:\s*(\d+) kB$/m.exec(fs.readFileSync("/proc/self/status", "utf8"));
  return { wallMs: performance.now(), cpuMs: (u.userCPUTime + u.systemCPUTime) / 1000, maxRssKb: m ? Number(m[1]) : -1 };
}

const startup = usage();

const schema = new arrow.Schema([
  new arrow.Field("id", new arrow.Int64(), false),
  new arrow.Field("cat", new arrow.Utf8(), true),
  new arrow.Field("val", new arrow.Float64(), true),
  new arrow.Field("at", new arrow.TimestampMicrosecond(), true),
]);

// parse reads the JSON lines of file into one record batch of schema.
function parse(file) {
  const lines = fs.readFileSync(file, "utf8").split("\n");
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  const n = lines.length;
  const id = new BigInt64Array(n);
  const val = new Float64Array(n);
  const at = new BigInt64Array(n);
  const offsets = new Int32Array(n + 1);
  const parts = new Array(n);
  const enc = new TextEncoder();
  let total = 0;
  for (let i = 0; i < n; i++) {
    const r = JSON.parse(lines[i]);
    id[i] = BigInt(r.id);
    val[i] = r.val;
    at[i] = BigInt(r.at);
    parts[i] = enc.encode(r.cat);
    total += parts[i].length;
    offsets[i + 1] = total;
  }
  const data = new Uint8Array(total);
  for (let i = 0; i < n; i++) data.set(parts[i], offsets[i]);
  const children = [
    arrow.makeData({ type: new arrow.Int64(), length: n, nullCount: 0, data: id }),
    arrow.makeData({ type: new arrow.Utf8(), length: n, nullCount: 0, valueOffsets: offsets, data }),
    arrow.makeData({ type: new arrow.Float64(), length: n, nullCount: 0, data: val }),
    arrow.makeData({ type: new arrow.TimestampMicrosecond(), length: n, nullCount: 0, data: at }),
  ];
  const struct = arrow.makeData({ type: new arrow.Struct(schema.fields), length: n, nullCount: 0, children });
  return new arrow.Table([new arrow.RecordBatch(schema, struct)]);
}

const [dbDir, name, file] = process.argv.slice(2);
const tb = parse(file);
const parsed = usage();
const db = await lancedb.connect(dbDir);
const t = await db.openTable(name);
await t.add(tb);
const added = usage();
const count = await t.countRows();
const version = await t.version();
t.close();
const out = {
  rows: tb.numRows,
  count,
  version,
  startupWallMs: startup.wallMs,
  startupCpuMs: startup.cpuMs,
  startupRssKb: startup.maxRssKb,
  parseWallMs: parsed.wallMs - startup.wallMs,
  parseCpuMs: parsed.cpuMs - startup.cpuMs,
  addWallMs: added.wallMs - parsed.wallMs,
  addCpuMs: added.cpuMs - parsed.cpuMs,
  maxRssKb: added.maxRssKb,
};
await new Promise((resolve) => process.stdout.write(JSON.stringify(out) + "\n", resolve));
process.exit(0);
