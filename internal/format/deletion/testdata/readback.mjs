// Test helper for deletion_test.go. LANCEDB_MODULES = a node_modules
// directory holding @lancedb/lancedb and apache-arrow.
//   create DIR N PRED  one-fragment table of ids 0..N-1 at DIR, then delete
//                      PRED; prints the deletion file names
//   live DIR           prints the live row offsets LanceDB returns
//   arrowjs FILE       prints the row_id values apache-arrow reads from an
//                      (uncompressed) .arrow deletion file
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const require = createRequire(path.join(process.env.LANCEDB_MODULES, "x.js"));
const arrow = require("apache-arrow");
const [mode, ...args] = process.argv.slice(2);
if (mode === "arrowjs") {
  const t = arrow.tableFromIPC(fs.readFileSync(args[0]));
  const f = t.schema.fields[0];
  console.log(JSON.stringify({ name: f.name, type: String(f.type), nullable: f.nullable, values: Array.from(t.getChild(f.name).toArray()) }));
} else {
  const lancedb = require("@lancedb/lancedb");
  const db = await lancedb.connect(args[0]);
  if (mode === "create") {
    const n = Number(args[1]);
    const schema = new arrow.Schema([new arrow.Field("id", new arrow.Int64(), false)]);
    const t = await db.createTable("t", lancedb.makeArrowTable(Array.from({ length: n }, (_, i) => ({ id: BigInt(i) })), { schema }));
    await t.delete(args[2]);
    console.log(JSON.stringify(fs.readdirSync(path.join(args[0], "t.lance", "_deletions"))));
  } else if (mode === "live") {
    const t = await db.openTable("t");
    const rows = await t.query().withRowId().select(["id"]).toArray();
    console.log(JSON.stringify({ count: await t.countRows(), live: rows.map((r) => Number(BigInt(r._rowid) & 0xffffffffn)).sort((a, b) => a - b) }));
  } else throw new Error("mode: create | live | arrowjs");
}
