#!/usr/bin/env node
// duckdb-dedup.mjs: DuckDB keeping the distinct records of a file and
// writing them out, the DuckDB peer of `fpdedup dedup` (bench/dedup.sh).
//
//   node bench/duckdb-dedup.mjs [--csv] [--threads N] [-o OUT] FILE
//
// Lines (the default): COPY (SELECT DISTINCT l FROM <each line one VARCHAR>)
// TO OUT, each distinct line written back byte for byte, as
// duckdb-distinct.mjs reads them (no header, no quoting, a delimiter the
// files never contain; DuckDB's reader drops a \r before \n and skips blank
// lines, harmless for the generated files).
//
// --csv: COPY (SELECT DISTINCT * FROM read_csv(FILE)) TO OUT (FORMAT csv,
// HEADER true): what a DuckDB user writes, columns sniffed and typed (so
// 0.00 comes back as 0.0: the rows, not the bytes, are kept). FILE may be
// compressed (.gz, .zst: DuckDB decompresses by extension).
//
// Either way the output is in no particular order (DuckDB does not keep
// input order; fpdedup dedup does). OUT defaults to /dev/stdout, so the
// rows go wherever the caller's stdout goes, like the other peers'. It
// needs @duckdb/node-api, which bench/peers.sh installs into bench/.peers.

import { existsSync } from 'node:fs';
import { connect, lit } from './duckdb-peer.mjs';

function usage(msg) {
  if (msg) process.stderr.write(`duckdb-dedup: ${msg}\n`);
  process.stderr.write('usage: node bench/duckdb-dedup.mjs [--csv] [--threads N] [-o OUT] FILE\n');
  process.exit(2);
}

let csv = false;
let threads = null;
let out = '/dev/stdout';
let file = null;
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--csv') csv = true;
  else if (a === '--threads') {
    threads = args[++i];
    if (!/^[1-9][0-9]*$/.test(threads ?? '')) usage('--threads needs a positive integer');
  } else if (a === '-o') {
    out = args[++i];
    if (!out) usage('-o needs a file name');
  } else if (a === '-h' || a === '--help') usage();
  else if (a.startsWith('-') && a !== '-') usage(`unknown option ${a}`);
  else if (file === null) file = a;
  else usage('one FILE only');
}
if (file === null) usage('no FILE');
if (file === '-') usage('stdin is not supported: DuckDB reads a file by name');
if (!existsSync(file)) usage(`${file}: no such file`);

const conn = await connect('duckdb-dedup', threads);
let sql;
if (csv) {
  sql = `COPY (SELECT DISTINCT * FROM read_csv(${lit(file)}))
    TO ${lit(out)} (FORMAT csv, HEADER true)`;
} else {
  // A line that is exactly the NULL string (\x02) reads as NULL: coalesce
  // gives it back its bytes. Written with the reader's settings, so no
  // line is quoted or escaped.
  sql = `COPY (
      SELECT DISTINCT coalesce(l, chr(2)) AS l
      FROM read_csv(${lit(file)},
        columns = {'l': 'VARCHAR'},
        header = false, auto_detect = false,
        delim = chr(1), quote = '', escape = '',
        nullstr = chr(2), strict_mode = false))
    TO ${lit(out)} (FORMAT csv, HEADER false, DELIMITER chr(1), QUOTE '', ESCAPE '')`;
}
try {
  await conn.run(sql);
} catch (e) {
  process.stderr.write(`duckdb-dedup: ${file}: ${e.message}\n`);
  process.exitCode = 2;
} finally {
  conn.closeSync();
}
