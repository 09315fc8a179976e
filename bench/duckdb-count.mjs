#!/usr/bin/env node
// duckdb-count.mjs: DuckDB's peer of fpdedup count: each distinct line once,
// in first-occurrence order, with its count, as uniq -c prints it:
//
//   SELECT count(*), l FROM lines GROUP BY l ORDER BY min(line number)
//
//   node bench/duckdb-count.mjs [--threads N] [-o OUT] FILE
//
// Lines are read as in duckdb-dedup.mjs (one VARCHAR, no quoting, a
// delimiter the benchmark files never contain). The output is "%7d %s"
// lines, written by DuckDB's COPY (lpad gives the width). It needs
// @duckdb/node-api, which bench/peers.sh installs into bench/.peers.

import { existsSync } from 'node:fs';
import { connect, lit } from './duckdb-peer.mjs';

function usage(msg) {
  if (msg) process.stderr.write(`duckdb-count: ${msg}\n`);
  process.stderr.write('usage: node bench/duckdb-count.mjs [--threads N] [-o OUT] FILE\n');
  process.exit(2);
}

let threads = null;
let out = '/dev/stdout';
let file = null;
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--threads') {
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
if (!existsSync(file)) usage(`${file}: no such file`);

const conn = await connect('duckdb-count', threads);
// The file's order is the scan's (DuckDB preserves insertion order), so
// row_number() OVER () numbers lines as read.
const sql = `COPY (
    SELECT lpad(CAST(count(*) AS VARCHAR), 7, ' ') || ' ' || l AS line
    FROM (SELECT coalesce(l, chr(2)) AS l, row_number() OVER () AS n
          FROM read_csv(${lit(file)},
            columns = {'l': 'VARCHAR'},
            header = false, auto_detect = false,
            delim = chr(1), quote = '', escape = '',
            nullstr = chr(2), strict_mode = false))
    GROUP BY l
    ORDER BY min(n))
  TO ${lit(out)} (FORMAT csv, HEADER false, DELIMITER chr(1), QUOTE '', ESCAPE '')`;
try {
  await conn.run(sql);
} catch (e) {
  process.stderr.write(`duckdb-count: ${file}: ${e.message}\n`);
  process.exitCode = 2;
} finally {
  conn.closeSync();
}
