#!/usr/bin/env node
// duckdb-parquet.mjs: DuckDB's side of bench/parquet.sh.
//
//   node bench/duckdb-parquet.mjs gen ROWS OUT.parquet
//       events as the data lake holds them (testdata/parquet/gen.mjs's
//       events, at any size): user_id BIGINT, device_id VARCHAR, ts
//       TIMESTAMP_MS, amount DECIMAL(18,2), event VARCHAR; ~38% of rows
//       repeat an earlier key; zstd, DuckDB's row groups; one thread, so
//       the same bytes each time.
//   node bench/duckdb-parquet.mjs csv FILE.parquet OUT.csv
//       the same rows as CSV with a header, ts as its stored integer.
//   node bench/duckdb-parquet.mjs distinct [--threads N] FILE.parquet
//       the peer of fpdedup build/count: the distinct keys
//       (user_id, device_id, ts), printed as their number.
//   node bench/duckdb-parquet.mjs dedup [--threads N] [--memory-limit SIZE] [--key COLS] [--ts-ms COL] FILE.parquet OUT.parquet
//       the peer of fpdedup dedup: each key's first row, in file order
//       (SIZE: DuckDB's memory_limit, e.g. 256MB, the peer of --mem; COLS
//       the key columns, user_id,device_id,ts by default; COL the
//       TIMESTAMP_MS column, ts by default, written back as TIMESTAMP_MS).
import { connect, lit } from './duckdb-peer.mjs';

// DuckDB's error as the last line of stderr, one line, which the bench
// reports (memory_limit's "Out of Memory Error" is how a peer fares).
process.on('uncaughtException', (e) => {
  process.stderr.write(`duckdb-parquet: ${String(e && e.message || e).replace(/\s+/g, ' ')}\n`);
  process.exit(1);
});

const [cmd, ...rest] = process.argv.slice(2);
if (cmd === 'gen') {
  const [rows, out] = rest;
  const n = Number(rows);
  if (!Number.isInteger(n) || n < 1 || !out) {
    process.stderr.write('usage: node bench/duckdb-parquet.mjs gen ROWS OUT.parquet\n');
    process.exit(2);
  }
  const con = await connect('duckdb-parquet', '1');
  await con.run('SET preserve_insertion_order = true');
  const key = `(hash(i, 'key') % ${Math.round(n * 0.96)})`;
  await con.run(`COPY (SELECT
    (1000000 + ${key} // 8)::BIGINT AS user_id,
    'dv-' || lpad(to_hex((hash(${key}, 'dev') % 1099511627776)::BIGINT), 13, '0') AS device_id,
    make_timestamp_ms((1767225600000 + ${key} * 37 + ${key} % 8)::BIGINT)::TIMESTAMP_MS AS ts,
    ((hash(i, 'amt') % 100000000)::BIGINT::DECIMAL(18,2) / 100)::DECIMAL(18,2) AS amount,
    substr(md5(i::VARCHAR) || '|evt=' || (hash(i, 'e') % 40)::VARCHAR || '|' || md5((i * 7)::VARCHAR), 1, 60) AS event
    FROM range(${n}) t(i) ORDER BY i) TO ${lit(out)} (FORMAT parquet, COMPRESSION zstd)`);
} else if (cmd === 'csv') {
  // The same rows as CSV with a header, ts as the integer the Parquet file
  // stores (its key text), for count and build from CSV beside Parquet.
  const [file, out] = rest;
  const con = await connect('duckdb-parquet', null);
  await con.run('SET preserve_insertion_order = true');
  await con.run(`COPY (SELECT * REPLACE (epoch_ms(ts) AS ts) FROM read_parquet(${lit(file)})) TO ${lit(out)} (FORMAT csv, HEADER true)`);
} else if (cmd === 'distinct') {
  let threads = null;
  if (rest[0] === '--threads') {
    threads = rest[1];
    rest.splice(0, 2);
  }
  const con = await connect('duckdb-parquet', threads);
  const r = await con.runAndReadAll(`SELECT count(DISTINCT (user_id, device_id, ts)) FROM read_parquet(${lit(rest[0])})`);
  process.stdout.write(`${r.getRows()[0][0]}\n`);
} else if (cmd === 'dedup') {
  // The peer of fpdedup dedup: each key's first row, every column, in
  // file order, written as zstd Parquet.
  let threads = null;
  let memory = null;
  let key = 'user_id,device_id,ts';
  let tsMs = 'ts';
  while (['--threads', '--memory-limit', '--key', '--ts-ms'].includes(rest[0])) {
    if (rest[0] === '--threads') threads = rest[1];
    else if (rest[0] === '--memory-limit') memory = rest[1];
    else if (rest[0] === '--key') key = rest[1];
    else tsMs = rest[1];
    rest.splice(0, 2);
  }
  const ident = (c) => '"' + c.replaceAll('"', '""') + '"';
  const partition = key.split(',').map(ident).join(', ');
  const [file, out] = rest;
  const con = await connect('duckdb-parquet', threads);
  await con.run('SET preserve_insertion_order = true');
  if (memory) {
    // fpdedup dedup --mem's peer: DuckDB spills to its temp directory
    // beside the output, or fails, as it fares.
    await con.run(`SET memory_limit = ${lit(memory)}`);
    await con.run(`SET temp_directory = ${lit(out + '.duckdb-tmp')}`);
  }
  // The timestamp is cast back: DuckDB reads TIMESTAMP_MS as TIMESTAMP and
  // would write microseconds, another file than its input's schema.
  await con.run(`COPY (SELECT * EXCLUDE (file_row_number) REPLACE (${ident(tsMs)}::TIMESTAMP_MS AS ${ident(tsMs)}) FROM read_parquet(${lit(file)}, file_row_number = true)
    QUALIFY row_number() OVER (PARTITION BY ${partition} ORDER BY file_row_number) = 1
    ORDER BY file_row_number) TO ${lit(out)} (FORMAT parquet, COMPRESSION zstd)`);
} else {
  process.stderr.write('usage: node bench/duckdb-parquet.mjs gen|csv|distinct|dedup ...\n');
  process.exit(2);
}
