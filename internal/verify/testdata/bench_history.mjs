// The verify benchmark's LanceDB side (TestBenchVerifyHistory).
//
//   node bench_history.mjs DB TABLE   read every version of TABLE, one JSON line out
//
// LanceDB has no verify. The nearest work it does is reading the whole
// history: for every version from 1 to the latest, checkout (which reads
// that version's manifest) and countRows (which sums the fragments' row
// counts from it), in one process. This is not verify's check: verify also
// lists the table's objects and checks every version against them.
//
// startup is the process up to LanceDB's module loaded (wall since the
// process began, CPU and peak RSS at that point); walk is connect, open and
// the walk over the versions. maxRssKb is the process's peak, Node's
// baseline included.
//
// LanceDB is found through $LANCEDB_NODE_MODULES, as oracle.mjs does.

import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";

const require = createRequire(path.join(process.env.LANCEDB_NODE_MODULES, "..", "package.json"));
const lancedb = require("@lancedb/lancedb");

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
const [dbDir, name] = process.argv.slice(2);
const db = await lancedb.connect(dbDir);
const t = await db.openTable(name);
const latest = await t.version();
let versions = 0;
let rows = 0;
for (let v = 1; v <= latest; v++) {
  await t.checkout(v);
  rows += await t.countRows();
  versions++;
}
const walked = usage();
t.close();
const out = {
  versions,
  rows,
  startupWallMs: startup.wallMs,
  startupCpuMs: startup.cpuMs,
  startupRssKb: startup.maxRssKb,
  walkWallMs: walked.wallMs - startup.wallMs,
  walkCpuMs: walked.cpuMs - startup.cpuMs,
  maxRssKb: walked.maxRssKb,
};
await new Promise((resolve) => process.stdout.write(JSON.stringify(out) + "\n", resolve));
process.exit(0);
