package bench

import (
	"slices"
	"strings"
)

// The jobs a run can measure. DefaultJobs are what a run measures unless
// told otherwise: every job the issues set targets for. ExtraJobs are
// measured when named: merge-partitions and build-partitions (the
// scale-out's merges and partitioned builds, on random fingerprints) and
// mem (each command's anonymous memory under a sweep of --mem) and scale
// (indexes of 10^7 to 10^9 keys: scale.go) and redisbloom-audit,
// redisbloom-rebuild and redisbloom-apply (reconcile against RedisBloom filters on a server of
// the run's own: redisbloom.go) and etcd-audit and etcd-apply (reconcile
// against a single etcd member of the run's own: etcd.go). A run measures its jobs in the
// order of AllJobs.
var (
	DefaultJobs = append([]string{"build", "query-present", "query-absent", "dedup-lines", "dedup-bounded", "dedup-csv", "dedup-zstd", "count", "merge"}, ParquetJobs...)
	// ParquetJobs read events.parquet: the CSV's records typed.
	ParquetJobs = []string{"parquet-dedup", "parquet-bounded", "parquet-count", "parquet-build"}
	ExtraJobs   = append(append([]string{"merge-partitions", "build-partitions", "mem", "scale"}, RedisBloomJobs...), EtcdJobs...)
	AllJobs     = append(slices.Clone(DefaultJobs), ExtraJobs...)
)

// DefaultMemSweep is the --mem values the mem job measures each command
// under: the floor, the fixed buffers' size, and two that hold the
// seen-set of 10M records or more.
var DefaultMemSweep = []string{"16MiB", "64MiB", "256MiB", "1GiB"}

// jobNeeds are the jobs that read what another job makes: the queries look
// the lines up in the index the build job writes, and the bounded Parquet
// dedup's rows are checked against the unbounded one's output.
var jobNeeds = map[string]string{"query-present": "build", "query-absent": "build", "parquet-bounded": "parquet-dedup"}

// selectJobs resolves Options.Jobs: nil is DefaultJobs, "all" every job,
// "default" the default ones. It returns the set and the jobs in the order
// they run.
func selectJobs(names []string) (map[string]bool, []string, error) {
	if len(names) == 0 {
		names = DefaultJobs
	}
	sel := map[string]bool{}
	for _, n := range names {
		switch {
		case n == "all":
			for _, j := range AllJobs {
				sel[j] = true
			}
		case n == "default":
			for _, j := range DefaultJobs {
				sel[j] = true
			}
		case slices.Contains(AllJobs, n):
			sel[n] = true
		default:
			return nil, nil, optionErrorf("no job %q (the jobs: %s; or all, default)", n, strings.Join(AllJobs, ", "))
		}
	}
	var order []string
	for _, j := range AllJobs {
		if !sel[j] {
			continue
		}
		if need := jobNeeds[j]; need != "" && !sel[need] {
			return nil, nil, optionErrorf("job %s needs job %s (it reads what %s makes)", j, need, need)
		}
		order = append(order, j)
	}
	return sel, order, nil
}
