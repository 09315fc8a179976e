#!/usr/bin/env node
// duckdb-distinct.mjs: DuckDB's answer to "how many distinct lines", the
// DuckDB peer of DESIGN section 7.
//
//   node bench/duckdb-distinct.mjs [--exact] [--threads N] FILE
//
// Prints one number. By default it counts distinct 64-bit hashes,
// count(DISTINCT hash(l)): DuckDB's fastest distinct, what a user who only
// wants the count would write; two lines may share a hash, with odds about
// n^2/2^65 (1 in 10^6 at 6M distinct lines), fine for timing but not exact.
// --exact counts the lines themselves, count(DISTINCT l): the like-for-like
// peer of an exact tool.
//
// Each line is one VARCHAR: no header, no quoting or escaping, and a delimiter
// (\x01) that the benchmark files never contain, so a comma is just a byte.
// Limits, harmless for the files bench/ generates but why this is not a
// general "sort -u | wc -l": DuckDB's CSV reader drops a \r before \n and
// skips blank lines. It needs @duckdb/node-api, which bench/peers.sh installs
// into bench/.peers.

import { existsSync } from 'node:fs';
import { connect, lit } from './duckdb-peer.mjs';

function usage(msg) {
  if (msg) process.stderr.write(`duckdb-distinct: ${msg}\n`);
  process.stderr.write('usage: node bench/duckdb-distinct.mjs [--exact] [--threads N] FILE\n');
  process.exit(2);
}

let exact = false;
let threads = null;
let file = null;
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--exact') exact = true;
  else if (a === '--threads') {
    threads = args[++i];
    if (!/^[1-9][0-9]*$/.test(threads ?? '')) usage('--threads needs a positive integer');
  } else if (a === '-h' || a === '--help') usage();
  else if (a.startsWith('-') && a !== '-') usage(`unknown option ${a}`);
  else if (file === null) file = a;
  else usage('one FILE only');
}
if (file === null) usage('no FILE');
if (file === '-') usage('stdin is not supported: DuckDB reads a file by name');
if (!existsSync(file)) usage(`${file}: no such file`);

const conn = await connect('duckdb-distinct', threads);
// A line that is exactly the NULL string (\x02, the least likely one-byte
// line; DuckDB has no "no NULL string" setting) reads as NULL: coalesce
// gives it back its bytes, so it is counted like any other line.
const line = 'coalesce(l, chr(2))';
const expr = exact ? line : `hash(${line})`;
const sql = `
  SELECT count(DISTINCT ${expr}) AS n
  FROM read_csv(${lit(file)},
    columns = {'l': 'VARCHAR'},
    header = false, auto_detect = false,
    delim = chr(1), quote = '', escape = '',
    nullstr = chr(2), strict_mode = false)`;
try {
  const reader = await conn.runAndReadAll(sql);
  const [[n]] = reader.getRows();
  process.stdout.write(`${n}\n`);
} catch (e) {
  process.stderr.write(`duckdb-distinct: ${file}: ${e.message}\n`);
  process.exit(2);
} finally {
  conn.closeSync();
}
