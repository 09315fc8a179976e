// Package bench is the benchmark harness behind the fpdedup-bench command:
// it measures fpdedup beside its peers on data from package bench/gen and
// reports what it found. The product binary does not link it (its charts
// pull in plotting, font and PDF libraries); a test in cmd/fpdedup checks
// that.
//
// Run generates the data into a temporary directory and measures each job
// as whole processes, fpdedup's rows interleaved with the peers' (sort -u,
// mawk/gawk, DuckDB through node, the bloom CLI, and cat, zstd -dc and dd as
// floors), each row once untimed and checked against the generator's exact
// distinct count, then timed: medians of wall time, CPU and peak RSS
// (measure.go). In process it times single index lookups warm and cold
// (lookup.go) and reads the index's bytes per key and filter
// false-positive rates (fpdedup inspect --json). The jobs (select.go):
//
//   - build, query-present, query-absent, dedup-lines, dedup-bounded,
//     dedup-csv, dedup-zstd and merge, the default: every job the issues
//     set a target for;
//   - merge-partitions and build-partitions (partitions.go): the scale-out's
//     stitch of partitions, k-way merges and partitioned builds, on random
//     fingerprints;
//   - mem (mem.go): every command once under each --mem of a sweep, its
//     anonymous memory sampled (RunSampled, rss.go);
//   - redisbloom-audit, redisbloom-rebuild and redisbloom-apply
//     (redisbloom.go): reconcile against RedisBloom filters on a
//     redis-server of the run's own;
//   - etcd-audit and etcd-apply (etcd.go): reconcile against a single etcd
//     member of the run's own, beside etcdctl (whole and page by page) and
//     a bare client loop (fpdedup-bench etcd-bare create).
//
// The Report (report.go; report.json, its schema in schema.json) holds
// every figure; report.md (markdown.go) and the charts (charts.go) are drawn
// from it alone, so an old report.json can be redrawn or compared
// (compare.go). The issues' targets are judged on it (targets.go) and a
// capacity estimate for a day's volume is made from its rates
// (capacity.go).
//
// The scripts beside this file are presets of fpdedup-bench (foundation.sh,
// dedup.sh, merge.sh, mem.sh, etcd-reconcile.sh; lib.sh builds the two
// binaries), reconcile.sh and l2bloom.sh (fpdedup reconcile against real
// servers, under scripts/services: key stores, the L2 bloom), etcd.sh
// (reconcile/etcdkv's benchmarks beside etcdctl), and
// peers.sh, which installs the peers. The DuckDB scripts (duckdb-*.mjs)
// are embedded, so an installed fpdedup-bench runs them without the source
// tree.
package bench
