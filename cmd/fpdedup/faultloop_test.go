package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/fpdedup/fpdedup/bench/gen"
	"github.com/fpdedup/fpdedup/internal/failpoint"
	"github.com/fpdedup/fpdedup/internal/pagecache"
	"github.com/fpdedup/fpdedup/internal/serverlock"
	"github.com/fpdedup/fpdedup/internal/tempfile"
)

// faultOps are the operations the loop fails, one at a time.
var faultOps = []failpoint.Op{failpoint.Create, failpoint.Write, failpoint.Sync, failpoint.Close, failpoint.Rename, failpoint.DirSync, failpoint.Read, failpoint.Open}

// TestFaultLoop fails, for each command that writes, the Nth file
// operation for every N from 1 to all of them (pebble's errorfs, bbolt's
// failpoints), and checks after each run: exit 2 and a message naming the
// injected fault; every old output byte for byte as it was; no temp file,
// lock file or scratch directory left; and then a clean run. A fault after
// the commit point (the directory fsync after the rename) is the one
// exception: the outputs are published, the exit is 0, and a warning says
// they may not survive a crash. So is the device cache, which a job checks
// as an optional output and writes after its commit point: a fault on it
// is a warning, with every output published and the old cache as it was.
//
// Two jobs need what a machine may lack, and are skipped without it: the
// device cache needs a disk that a measure can read (not tmpfs), and
// --apply's checkpoint a Redis ($FPDEDUP_REDIS_ADDR, as
// scripts/services/with-services.sh starts it).
func TestFaultLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs each command once per file operation")
	}
	dir := t.TempDir()
	records := filepath.Join(dir, "in.txt")
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	if _, err := gen.Generate(bw, gen.Options{Records: 30_000, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	bw.Flush()
	if err := os.WriteFile(records, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// The runs that spill read the first n of these distinct keys: just
	// enough, at --mem 16MiB and one thread, to make every file operation
	// of their spill paths happen (each job says which files it must
	// spill, and fails if its input no longer makes them: then raise n).
	// Fewer keys keep the loop cheap: it runs the command once per
	// operation.
	keys := func(n int) string {
		var b bytes.Buffer
		for i := range n {
			fmt.Fprintf(&b, "k%d\n", i)
		}
		path := filepath.Join(dir, fmt.Sprintf("keys%d.txt", n))
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// Measured: dedup's seen-set writes its first run between 120k and
	// 150k keys (--record sorts 200k in two runs); build's sort spills
	// between 200k and 250k; count's key table between 250k and 300k.
	dedupSpill, buildSpill, countSpill := keys(200_000), keys(300_000), keys(350_000)
	index := filepath.Join(dir, "in.fpx")
	index2 := filepath.Join(dir, "in2.fpx") // the same keys under another name, for merge
	shaIndex := filepath.Join(dir, "sha.fpx")
	online := filepath.Join(dir, "online.txt")
	for _, args := range [][]string{
		{"build", "-q", "-o", index, records},
		{"build", "-q", "-o", index2, records},
		{"build", "-q", "--hash", "sha256", "-o", shaIndex, records},
	} {
		if code, _, stderr := runInProcess(args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr)
		}
	}
	// An index a disk can be measured on (devrate's 64 MiB), looked up in
	// cold by the device cache's job.
	var big bytes.Buffer
	for i := range 4_000_000 {
		fmt.Fprintf(&big, "k%d\n", i)
	}
	bigKeys := filepath.Join(dir, "big.txt")
	bigIndex := filepath.Join(dir, "big.fpx")
	if err := os.WriteFile(bigKeys, big.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runInProcess("build", "-q", "-o", bigIndex, bigKeys); code != 0 {
		t.Fatalf("build %s: exit %d\n%s", bigIndex, code, stderr)
	}
	os.Remove(bigKeys)
	code, out, stderr := runInProcess("dump", shaIndex)
	if code != 0 {
		t.Fatalf("dump: %d %s", code, stderr)
	}
	lines := strings.SplitAfter(out, "\n")
	if err := os.WriteFile(online, []byte(strings.Join(lines[:len(lines)/2], "")), 0o644); err != nil {
		t.Fatal(err)
	}

	type job struct {
		name    string
		args    []string // @ names a file in the job's output directory
		outputs []string // published on success; pre-filled with old bytes
		want    int      // a clean run's exit code
		// report: an output written on failure too, to say what failed
		// (reconcile --report); it must then hold the error.
		report string
		// spills: files in --tmpdir the clean run must write (a part of
		// their names), so that the faults reach the spill path.
		spills []string
		// deviceCache: the job measures the disk under the index it reads
		// cold (measureAbove lowered, the index evicted before each run)
		// and caches the figure in @fpdedup/devices.json, an output.
		deviceCache string
		// online: a Redis URL the job writes to, its set emptied and
		// @c.ckpt removed before each run ("" and skipped without one).
		online func(t *testing.T) string
	}
	jobs := []job{
		{"build", []string{"build", "-q", "-o", "@o.fpx", "--stats-json", "@st.json", records}, []string{"o.fpx", "st.json"}, 0, "", nil, "", nil},
		{"build spilling", []string{"build", "-q", "--mem", "16MiB", "--threads", "1", "--tmpdir", "@tmp", "-o", "@o.fpx", buildSpill}, []string{"o.fpx"}, 0, "", []string{"/run-"}, "", nil},
		{"merge", []string{"merge", "-q", "-o", "@o.fpx", "--metrics", "@m.prom", index, index2}, []string{"o.fpx", "m.prom"}, 0, "", nil, "", nil},
		{"dedup -o --record", []string{"dedup", "-q", "-o", "@o.txt", "--record", "@o.fpx", records}, []string{"o.txt", "o.fpx"}, 0, "", nil, "", nil},
		{"reconcile --missing", []string{"reconcile", "-q", "--index", shaIndex, "--online", "file:" + online, "--tmpdir", "@tmp", "--missing", "@o.fpx", "--report", "@r.json"}, []string{"o.fpx", "r.json"}, 1, "r.json", nil, "", nil},
		{"count spilling", []string{"count", "-q", "--mem", "16MiB", "--threads", "1", "--tmpdir", "@tmp", "-o", "@o.txt", countSpill}, []string{"o.txt"}, 0, "", []string{"/run-", "/keys.fpx", "/values"}, "", nil},
		{"dedup --keep last", []string{"dedup", "-q", "--keep", "last", "--tmpdir", "@tmp", "-o", "@o.txt", "--duplicates", "@d.txt", records}, []string{"o.txt", "d.txt"}, 0, "", nil, "", nil},
		{"replay --lost", []string{"replay", "-q", "--format", "csv", "--key", "1,2,3", "--time-field", "3", "--order", "arrival", "--l1", "64,ttl=1s", "--l2", "shards=2,bits=512,k=2", "--tmpdir", "@tmp", "--lost", "@o.txt", "--stats-json", "@st.json", records}, []string{"o.txt", "st.json"}, 0, "", nil, "", nil},
		{"dedup --record spilling", []string{"dedup", "-q", "--mem", "16MiB", "--threads", "1", "--tmpdir", "@tmp", "-o", "@o.txt", "--record", "@o.fpx", dedupSpill}, []string{"o.txt", "o.fpx"}, 0, "", []string{"/seen-", "/run-"}, "", nil},
		{"dedup --against measuring the disk", []string{"dedup", "--against", bigIndex, "-o", "@o.txt", "--stats-json", "@st.json", records}, []string{"o.txt", "st.json", "fpdedup/devices.json"}, 0, "", nil, bigIndex, nil},
		{"reconcile --apply --checkpoint", []string{"reconcile", "-q", "--index", shaIndex, "--online", "@ONLINE", "--apply", "--batch", "100000", "--checkpoint", "@c.ckpt", "--tmpdir", "@tmp", "--report", "@r.json"}, []string{"r.json"}, 0, "r.json", nil, "", faultLoopRedis},
	}

	old := []byte("old contents\n")
	total := 0
	for _, j := range jobs {
		t.Run(j.name, func(t *testing.T) {
			wd := t.TempDir()
			if err := os.Mkdir(filepath.Join(wd, "tmp"), 0o755); err != nil {
				t.Fatal(err)
			}
			online := ""
			if j.online != nil {
				online = j.online(t)
			}
			var args []string
			for _, a := range j.args {
				a = strings.ReplaceAll(a, "@ONLINE", online)
				args = append(args, strings.ReplaceAll(a, "@", wd+"/"))
			}
			dirs := []string{wd, filepath.Join(wd, "tmp")}
			cacheDir := filepath.Join(wd, "fpdedup")
			if j.deviceCache != "" {
				t.Setenv("XDG_CACHE_HOME", wd)
				defer func(was int64) { measureAbove = was }(measureAbove)
				measureAbove = 0
				if err := os.Mkdir(cacheDir, 0o755); err != nil {
					t.Fatal(err)
				}
				dirs = append(dirs, cacheDir)
			}
			reset := func() {
				for _, o := range j.outputs {
					if err := os.WriteFile(filepath.Join(wd, o), old, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if j.deviceCache != "" {
					evictFile(t, j.deviceCache)
				}
				if j.online != nil {
					os.Remove(filepath.Join(wd, "c.ckpt"))
					emptyOnline(t, online)
				}
			}
			reset()
			disarm := failpoint.Arm(0, faultOps...)
			code, _, stderr := runInProcess(args...)
			n, ops := disarm()
			if code != j.want {
				t.Fatalf("clean run: exit %d, want %d\n%s", code, j.want, stderr)
			}
			if j.deviceCache != "" && !strings.Contains(stderr, "measuring the read rates") {
				t.Fatalf("the clean run did not measure the disk under %s:\n%s", j.deviceCache, stderr)
			}
			if j.deviceCache != "" && !slices.ContainsFunc(ops, func(op string) bool { return strings.Contains(op, cacheDir+"/") }) {
				t.Skipf("the disk under %s cannot be measured here: nothing cached\n%s", j.deviceCache, stderr)
			}
			if j.online != nil && !slices.ContainsFunc(ops, func(op string) bool { return strings.Contains(op, "c.ckpt") }) {
				t.Fatalf("the clean run saved no checkpoint:\n%s", stderr)
			}
			if n == 0 {
				t.Fatal("no file operation went through the fault seam")
			}
			for _, name := range j.spills {
				if !slices.ContainsFunc(ops, func(op string) bool {
					_, path, _ := strings.Cut(op, " /")
					return strings.HasPrefix("/"+path, filepath.Join(wd, "tmp")) && strings.Contains(path, name)
				}) {
					t.Fatalf("the clean run wrote no %s file in --tmpdir: its input no longer spills", name)
				}
			}
			for i := int64(1); i <= n; i++ {
				reset()
				disarm := failpoint.Arm(i, faultOps...)
				code, _, stderr := runInProcess(args...)
				disarm()
				op := ops[i-1]
				dirSync := strings.HasPrefix(op, failpoint.DirSync.String())
				if dirSync && i >= 2 && strings.HasSuffix(ops[i-2], "/c.ckpt") {
					// The checkpoint is published during the work: one
					// that might not survive a crash fails the run.
					dirSync = false
				}
				_, opPath, _ := strings.Cut(op, " /")
				cacheOp := j.deviceCache != "" && strings.HasPrefix("/"+opPath, cacheDir)
				afterCommit := dirSync || cacheOp
				published := map[string]bool{}
				if _, list, ok := strings.Cut(stderr, "already published: "); ok {
					for _, p := range strings.Split(strings.TrimSpace(strings.SplitN(list, ")", 2)[0]), ", ") {
						published[filepath.Base(p)] = true
					}
				}
				switch {
				case afterCommit:
					if code != j.want || !strings.Contains(stderr, "warning") {
						t.Errorf("fault %d (%s) after the commit point: exit %d, want %d with a warning\n%s", i, op, code, j.want, stderr)
					}
				case code != exitError:
					t.Errorf("fault %d (%s): exit %d, want %d\n%s", i, op, code, exitError, stderr)
				case !strings.Contains(stderr, "injected fault"):
					t.Errorf("fault %d (%s): the message does not name it:\n%s", i, op, stderr)
				}
				for _, o := range j.outputs {
					got, err := os.ReadFile(filepath.Join(wd, o))
					if err != nil {
						t.Fatalf("fault %d (%s): %s: %v", i, op, o, err)
					}
					if o == j.report && code == exitError && !bytes.Equal(got, old) {
						if !bytes.Contains(got, []byte("injected fault")) {
							t.Errorf("fault %d (%s): the report of the failed run does not name the fault:\n%s", i, op, got)
						}
						continue
					}
					want := afterCommit || published[o]
					if o == "fpdedup/devices.json" {
						want = dirSync // written after the others, unless its own write failed
					}
					if replaced := !bytes.Equal(got, old); replaced != want {
						t.Errorf("fault %d (%s): %s replaced: %v; stderr:\n%s", i, op, o, replaced, stderr)
					}
				}
				for _, d := range dirs {
					for _, e := range entries(t, d) {
						if tempfile.IsTemp(e) {
							t.Errorf("fault %d (%s): debris %s in %s", i, op, e, d)
						}
					}
				}
			}
			reset()
			if code, _, stderr := runInProcess(args...); code != j.want {
				t.Fatalf("clean run after the faults: exit %d\n%s", code, stderr)
			}
			t.Logf("%s: %d file operations, each failed once, all clean", j.name, n)
			total += int(n)
		})
	}
	t.Logf("fault loop: %d injections over %d commands", total, len(jobs))
}

// runInProcess runs fpdedup in this process (the fault seam is this
// process's).
func runInProcess(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(append([]string{"--progress", "never"}, args...), strings.NewReader(""), &o, &e)
	return code, o.String(), e.String()
}

// evictFile drops path from the page cache, so that a lookup finds it
// cold.
func evictFile(t *testing.T, path string) {
	t.Helper()
	if _, err := pagecache.Drop(path); err != nil {
		t.Fatal(err)
	}
}

// faultLoopRedis is the --online URL of a set in database 0 of the test
// Redis ($FPDEDUP_REDIS_ADDR; the reconcile tests use 1-15), held as the
// reconcile tests hold the servers (internal/serverlock: they may kill and
// restart them), or skips the test.
func faultLoopRedis(t *testing.T) string {
	addr := os.Getenv("FPDEDUP_REDIS_ADDR")
	if addr == "" {
		t.Skip("FPDEDUP_REDIS_ADDR is not set: no Redis to apply to (run under scripts/services/with-services.sh)")
	}
	serverlock.Hold(t)
	return "redis://" + addr + "/0?set=fpdedup:faultloop&hex=32"
}

// emptyOnline deletes the set faultLoopRedis names.
func emptyOnline(t *testing.T, online string) {
	t.Helper()
	u, err := url.Parse(online)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: u.Host, DB: 0, Protocol: 2, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	defer c.Close()
	if err := c.Del(context.Background(), u.Query().Get("set")).Err(); err != nil {
		t.Fatalf("redis at %s: %v", u.Host, err)
	}
}
