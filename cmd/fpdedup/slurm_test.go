package main

// The scale-out recipe (scripts/slurm/submit.sh and fpdedup-day.sbatch,
// docs/SCALE-OUT.md) on a real Slurm cluster: job arrays build and merge by
// prefix range on the cluster's nodes, a dependent job stitches, and the
// results are compared with cmp against one process's build. The cluster is
// the one scripts/services/slurm-up.sh starts on loopback (slurmctld, two
// slurmd node names); scripts/services/with-services.sh starts it and sets
//
//	FPDEDUP_SLURM=1        a cluster is up
//	SLURM_CONF=…/slurm.conf  where sbatch, squeue, scontrol and sacct find it
//
// Without them, or with -short, the tests skip and say so. The jobs run the
// fpdedup of FPDEDUP_BIN, else this test binary (TestMain runs it as
// fpdedup when it is called by that name).

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// slurmRun is one Slurm-backed test's context.
type slurmRun struct {
	t      *testing.T
	fp     string // the fpdedup the jobs run
	submit string // scripts/slurm/submit.sh
	jobs   []string
	works  []string // the -w of each submit
}

func newSlurmRun(t *testing.T) *slurmRun {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the Slurm scale-out tests take about a minute")
	}
	if os.Getenv("FPDEDUP_SLURM") != "1" || os.Getenv("SLURM_CONF") == "" {
		t.Skip("FPDEDUP_SLURM is not 1 or SLURM_CONF is unset: no Slurm cluster " +
			"(bash scripts/services/with-services.sh go test ./cmd/fpdedup -run Slurm starts one)")
	}
	for _, b := range []string{"sbatch", "squeue", "scontrol", "scancel", "sacct"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Fatalf("FPDEDUP_SLURM=1 but %s is missing: %v", b, err)
		}
	}
	if out, err := exec.Command("scontrol", "ping").CombinedOutput(); err != nil || !bytes.Contains(out, []byte("is UP")) {
		t.Fatalf("FPDEDUP_SLURM=1 but slurmctld does not answer (SLURM_CONF=%s): %v\n%s", os.Getenv("SLURM_CONF"), err, out)
	}
	submit, err := filepath.Abs(filepath.Join("..", "..", "scripts", "slurm", "submit.sh"))
	if err != nil {
		t.Fatal(err)
	}
	r := &slurmRun{t: t, fp: os.Getenv("FPDEDUP_BIN"), submit: submit}
	if r.fp == "" {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		r.fp = filepath.Join(t.TempDir(), "fpdedup")
		if err := os.Symlink(exe, r.fp); err != nil {
			t.Fatal(err)
		}
	}
	// Runs before TempDir's removal: no job of ours outlives the test.
	t.Cleanup(func() {
		r.t = t
		if len(r.jobs) == 0 {
			return
		}
		_ = exec.Command("scancel", r.jobs...).Run()
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end) && r.pending() != ""; {
			time.Sleep(200 * time.Millisecond)
		}
		if t.Failed() {
			r.logs()
		}
	})
	return r
}

// cmd runs a command and returns its stdout; a failure fails the test.
func (r *slurmRun) cmd(env []string, name string, args ...string) string {
	r.t.Helper()
	c := exec.Command(name, args...)
	c.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		r.t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// submitDay runs submit.sh and returns the ids of the arrays it submitted and
// of the stitch.
func (r *slurmRun) submitDay(env []string, args ...string) (arrays []string, stitch string) {
	r.t.Helper()
	env = append(env, "FPDEDUP="+r.fp)
	if i := slices.Index(args, "-w"); i >= 0 && i+1 < len(args) {
		r.works = append(r.works, args[i+1])
	}
	f := strings.Fields(r.cmd(env, "bash", append([]string{r.submit}, args...)...))
	if len(f) < 2 {
		r.t.Fatalf("submit.sh %s printed %q, not the job ids of arrays and a stitch", strings.Join(args, " "), f)
	}
	r.jobs = append(r.jobs, f...)
	return f[:len(f)-1], f[len(f)-1]
}

// pending lists the jobs of this test that squeue still shows.
func (r *slurmRun) pending() string {
	out, _ := exec.Command("squeue", "-h", "-o", "%i %T %R", "-j", strings.Join(r.jobs, ",")).Output()
	return strings.TrimSpace(string(out))
}

// wait polls squeue until none of this test's jobs is pending or running.
func (r *slurmRun) wait(limit time.Duration) time.Duration {
	r.t.Helper()
	start := time.Now()
	for {
		p := r.pending()
		if p == "" {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			r.t.Fatalf("jobs still queued after %v:\n%s", limit, p)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// slurmJob is one job, or one array task, as scontrol shows it.
type slurmJob struct {
	id, task, state, exit, node string
	restarts                    int
}

// show lists a job, or every task of an array job, from scontrol (which keeps
// finished jobs for MinJobAge).
func (r *slurmRun) show(id string) []slurmJob {
	r.t.Helper()
	var jobs []slurmJob
	for _, line := range strings.Split(strings.TrimSpace(r.cmd(nil, "scontrol", "show", "job", "-o", id)), "\n") {
		kv := map[string]string{}
		for _, f := range strings.Fields(line) {
			if k, v, ok := strings.Cut(f, "="); ok {
				kv[k] = v
			}
		}
		n, _ := strconv.Atoi(kv["Restarts"])
		jobs = append(jobs, slurmJob{id: kv["JobId"], task: kv["ArrayTaskId"], state: kv["JobState"],
			exit: kv["ExitCode"], node: kv["NodeList"], restarts: n})
	}
	slices.SortFunc(jobs, func(a, b slurmJob) int { return strings.Compare(a.task, b.task) })
	return jobs
}

// completed checks that a job (every task of an array) ended COMPLETED with
// exit 0, in scontrol and in the job completion log that sacct -c reads,
// and returns the jobs.
func (r *slurmRun) completed(id string) []slurmJob {
	r.t.Helper()
	jobs := r.show(id)
	var ids []string
	for _, j := range jobs {
		if j.state != "COMPLETED" || j.exit != "0:0" {
			r.t.Errorf("job %s task %q: %s, exit %s", j.id, j.task, j.state, j.exit)
		}
		ids = append(ids, j.id)
	}
	final := r.sacct(ids)
	for _, i := range ids {
		if h := final[i]; len(h) == 0 || h[len(h)-1] != "COMPLETED 0:0" {
			r.t.Errorf("sacct -c: job %s ended %q", i, h)
		}
	}
	return jobs
}

// sacct returns each job's records in the job completion log, oldest first
// ("STATE EXIT"; a requeue leaves a PENDING record before the final one).
func (r *slurmRun) sacct(ids []string) map[string][]string {
	r.t.Helper()
	// sacct -c complains on stderr about the array fields it cannot parse.
	out, err := exec.Command("sacct", "-c", "-n", "-P", "-o", "JobID,State,ExitCode", "-j", strings.Join(ids, ",")).Output()
	if err != nil {
		r.t.Fatalf("sacct -c: %v", err)
	}
	h := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Split(line, "|"); len(f) == 3 {
			h[f[0]] = append(h[f[0]], f[1]+" "+f[2])
		}
	}
	return h
}

// logs prints the jobs' logs and the controller's last lines.
func (r *slurmRun) logs() {
	for _, w := range r.works {
		logs, _ := filepath.Glob(filepath.Join(w, "logs", "*"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			r.t.Logf("%s:\n%s", l, b)
		}
	}
	ctld := filepath.Join(filepath.Dir(os.Getenv("SLURM_CONF")), "logs", "slurmctld.log")
	if b, err := os.ReadFile(ctld); err == nil {
		lines := strings.Split(string(b), "\n")
		r.t.Logf("%s (last lines):\n%s", ctld, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}

// build is one process's `fpdedup build -o OUT FILE...`, the reference.
func (r *slurmRun) build(out string, files ...string) time.Duration {
	r.t.Helper()
	start := time.Now()
	r.cmd(nil, r.fp, append([]string{"build", "-q", "-o", out}, files...)...)
	return time.Since(start)
}

// gen writes `fpdedup gen` events split into parts files
// dir/PREFIX-00… (gzip-compressed when zip), and returns their names.
func (r *slurmRun) gen(dir, prefix string, records, seed, parts int, zip bool) []string {
	r.t.Helper()
	all := filepath.Join(dir, prefix+".txt")
	r.cmd(nil, r.fp, "gen", "-q", "--records", strconv.Itoa(records), "--seed", strconv.Itoa(seed), "-o", all)
	data, err := os.ReadFile(all)
	if err != nil {
		r.t.Fatal(err)
	}
	os.Remove(all)
	lines := bytes.SplitAfter(data, []byte("\n"))
	var names []string
	for p := range parts {
		chunk := bytes.Join(lines[p*len(lines)/parts:(p+1)*len(lines)/parts], nil)
		name := filepath.Join(dir, fmt.Sprintf("%s-%02d.txt", prefix, p))
		if zip {
			name += ".gz"
			var b bytes.Buffer
			z, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
			z.Write(chunk)
			z.Close()
			chunk = b.Bytes()
		}
		if err := os.WriteFile(name, chunk, 0o644); err != nil {
			r.t.Fatal(err)
		}
		names = append(names, name)
	}
	return names
}

func slurmSame(t *testing.T, got, want string) {
	t.Helper()
	if out, err := exec.Command("cmp", got, want).CombinedOutput(); err != nil {
		t.Errorf("%s is not byte-identical to %s: %v %s", got, want, err, out)
	}
}

// TestSlurmRecipeInDocs: docs/SCALE-OUT.md shows the tested script, verbatim.
func TestSlurmRecipeInDocs(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "scripts", "slurm", "fpdedup-day.sbatch"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "SCALE-OUT.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, append(append([]byte("```bash\n"), script...), "```\n"...)) {
		t.Error("docs/SCALE-OUT.md does not show scripts/slurm/fpdedup-day.sbatch verbatim in a ```bash block: copy it there")
	}
}

// TestSlurmDays: three days of events (4 files each, a few million records
// in all, each day with some of the day before's records arriving late), one
// submit.sh per day chained with afterok. Days 1 and 3 go by prefix (an array
// of 4 `build --partition I/4` tasks), day 2 by input slices (4 whole-range
// builds, then 4 `merge --partition I/4`); the last array's tasks also fold
// their range of history; then a stitch. Each day's index is the bytes of one
// build of that day's files, the history the bytes of one build of all of
// them; a rollup of the three day indexes by `merge --partition I/4` on the
// array is too. Then a finished task is run again (scontrol requeue) and
// changes nothing.
func TestSlurmDays(t *testing.T) {
	r := newSlurmRun(t)
	dir := t.TempDir()
	const days, records, n = 3, 1_000_000, 4
	var dayFiles [][]string
	var all []string
	for d := range days {
		files := r.gen(dir, fmt.Sprintf("day%d", d+1), records, 100+d, 4, false)
		if d > 0 { // late arrivals: the day before's first 50k records again
			prev, err := os.Open(dayFiles[d-1][0])
			if err != nil {
				t.Fatal(err)
			}
			var late bytes.Buffer
			sc := bufio.NewScanner(prev)
			for i := 0; i < 50_000 && sc.Scan(); i++ {
				late.Write(sc.Bytes())
				late.WriteByte('\n')
			}
			prev.Close()
			name := filepath.Join(dir, fmt.Sprintf("day%d-late.txt", d+1))
			if err := os.WriteFile(name, late.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, name)
		}
		dayFiles = append(dayFiles, files)
		all = append(all, files...)
	}
	var refWall []time.Duration
	for d := range days {
		refWall = append(refWall, r.build(filepath.Join(dir, fmt.Sprintf("ref-day%d.fpx", d+1)), dayFiles[d]...))
	}
	r.build(filepath.Join(dir, "ref-all.fpx"), all...)

	history := filepath.Join(dir, "history.fpx")
	var arrays [][]string
	var stitches []string
	start := time.Now()
	after := ""
	for d := range days {
		args := []string{"day", "-n", strconv.Itoa(n), "-w", filepath.Join(dir, fmt.Sprintf("work-day%d", d+1)),
			"-o", filepath.Join(dir, fmt.Sprintf("day%d.fpx", d+1)), "-H", history}
		if d == 1 {
			args = append(args, "-s")
		}
		if after != "" {
			args = append(args, "-d", after)
		}
		a, s := r.submitDay(nil, append(args, dayFiles[d]...)...)
		if want := map[bool]int{true: 2, false: 1}[d == 1]; len(a) != want {
			t.Fatalf("day %d: submit.sh made %d arrays, want %d", d+1, len(a), want)
		}
		arrays, stitches, after = append(arrays, a), append(stitches, s), s
	}
	rollA, rollS := r.submitDay(nil, "merge", "-n", strconv.Itoa(n), "-w", filepath.Join(dir, "work-rollup"),
		"-o", filepath.Join(dir, "rollup.fpx"), "-d", after,
		filepath.Join(dir, "day1.fpx"), filepath.Join(dir, "day2.fpx"), filepath.Join(dir, "day3.fpx"))
	r.wait(5 * time.Minute)
	wall := time.Since(start)
	t.Logf("3 days (%d records each, %d tasks a day on the cluster) and the rollup: %.1f s wall from the first submit; one build of a day here: %.2f s",
		records, n, wall.Seconds(), refWall[0].Seconds())

	nodes := map[string]bool{}
	ids := append(slices.Concat(arrays...), stitches...)
	for _, id := range append(append(ids, rollA...), rollS) {
		for _, j := range r.completed(id) {
			nodes[j.node] = true
		}
	}
	if len(nodes) < 2 {
		t.Errorf("the tasks ran on %v only: the cluster has two nodes", nodes)
	}
	for d := range days {
		slurmSame(t, filepath.Join(dir, fmt.Sprintf("day%d.fpx", d+1)), filepath.Join(dir, fmt.Sprintf("ref-day%d.fpx", d+1)))
	}
	slurmSame(t, history, filepath.Join(dir, "ref-all.fpx"))
	slurmSame(t, filepath.Join(dir, "rollup.fpx"), filepath.Join(dir, "ref-all.fpx"))
	if t.Failed() {
		return
	}

	// A finished task again: it rebuilds part-1 and re-merges its range of
	// the (now newer) history, publishing the same bytes.
	work3 := filepath.Join(dir, "work-day3")
	before := map[string][]byte{}
	for _, f := range []string{"part-1.fpx", "hist-1.fpx"} {
		b, err := os.ReadFile(filepath.Join(work3, f))
		if err != nil {
			t.Fatal(err)
		}
		before[f] = b
	}
	info, err := os.Stat(filepath.Join(work3, "part-1.fpx"))
	if err != nil {
		t.Fatal(err)
	}
	task := arrays[2][0] + "_1"
	r.cmd(nil, "scontrol", "requeue", task)
	r.wait(2 * time.Minute)
	for _, j := range r.completed(task) {
		if j.restarts != 1 {
			t.Errorf("task %s after a requeue: %d restarts, want 1", task, j.restarts)
		}
	}
	again, err := os.Stat(filepath.Join(work3, "part-1.fpx"))
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(info, again) {
		t.Errorf("part-1.fpx was not published again by the rerun")
	}
	for f, b := range before {
		if now, err := os.ReadFile(filepath.Join(work3, f)); err != nil || !bytes.Equal(now, b) {
			t.Errorf("%s changed when its finished task ran again (%v)", f, err)
		}
	}
	slurmSame(t, history, filepath.Join(dir, "ref-all.fpx"))
}

// buildingPID waits for the fpdedup (the binary fp) that builds out (its -o)
// and has read at least min bytes, and returns its PID; 0 if none is seen
// within limit.
func buildingPID(t *testing.T, fp, out string, min int64, limit time.Duration) int {
	t.Helper()
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			args := strings.Split(string(b), "\x00")
			if args[0] != fp || !slices.Contains(args, "build") || !slices.Contains(args, out) {
				continue
			}
			io, err := os.ReadFile(filepath.Join(filepath.Dir(p), "io"))
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(io), "\n") {
				if v, ok := strings.CutPrefix(line, "rchar: "); ok {
					if n, _ := strconv.ParseInt(v, 10, 64); n >= min {
						pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
						return pid
					}
				}
			}
		}
	}
	return 0
}

// TestSlurmKilledTask: a day of 4M records in 4 gzip files (a build of it
// takes long enough to be caught reading), on an array of 4 tasks.
//
// step: task 1's build step is killed mid-build (scancel --signal=KILL
// JOB_1.0, as an OOM kill or a crash would); the task requeues itself, runs
// again, and the day is the bytes of one build, with no debris left.
//
// element: task 2 itself is killed mid-build (scancel --signal=KILL JOB_2)
// and requeued by hand (scontrol requeue). It runs again and succeeds, but
// Slurm 22.05 does not count a cancelled-then-requeued task towards the
// array's afterok: the stitch is cancelled and nothing is published. The
// same submit.sh again ends byte-identical.
func TestSlurmKilledTask(t *testing.T) {
	r := newSlurmRun(t)
	dir := t.TempDir()
	files := r.gen(dir, "day", 4_000_000, 7, 4, true)
	ref := filepath.Join(dir, "ref.fpx")
	r.build(ref, files...)
	const n = "4"

	parent := t
	t.Run("step", func(t *testing.T) {
		r.t = t
		defer func() { r.t = parent }()
		work, out := filepath.Join(dir, "work-step"), filepath.Join(dir, "day-step.fpx")
		arrays, stitch := r.submitDay(nil, append([]string{"day", "-n", n, "-w", work, "-o", out}, files...)...)
		array := arrays[0]
		pid := buildingPID(t, r.fp, filepath.Join(work, "part-1.fpx"), 4<<20, time.Minute)
		if pid == 0 {
			t.Fatal("task 1's build was not seen reading its input")
		}
		r.cmd(nil, "scancel", "--signal=KILL", array+"_1.0")
		r.wait(3 * time.Minute)
		for _, j := range r.completed(array) {
			if want := map[string]int{"1": 1}[j.task]; j.restarts != want {
				t.Errorf("task %s: %d restarts, want %d", j.task, j.restarts, want)
			}
			if j.task == "1" {
				if h := r.sacct([]string{j.id})[j.id]; len(h) != 2 || !strings.HasPrefix(h[0], "PENDING") {
					t.Errorf("sacct -c: task 1 (job %s) went through %q, not a requeue then completion", j.id, h)
				}
			}
		}
		r.completed(stitch)
		logb, _ := os.ReadFile(filepath.Join(work, "logs", "fpdedup-day-"+array+"_1.out"))
		if !bytes.Contains(logb, []byte("requeueing")) {
			t.Errorf("task 1's log does not show the requeue:\n%s", logb)
		}
		slurmSame(t, out, ref)
		debris, _ := filepath.Glob(filepath.Join(work, ".*fpdedup-*"))
		if len(debris) > 0 {
			t.Errorf("the killed build's debris is still there: %v", debris)
		}
	})

	t.Run("element", func(t *testing.T) {
		r.t = t
		defer func() { r.t = parent }()
		work, out := filepath.Join(dir, "work-element"), filepath.Join(dir, "day-element.fpx")
		args := append([]string{"day", "-n", n, "-w", work, "-o", out}, files...)
		arrays, stitch := r.submitDay(nil, args...)
		array := arrays[0]
		if buildingPID(t, r.fp, filepath.Join(work, "part-2.fpx"), 4<<20, time.Minute) == 0 {
			t.Fatal("task 2's build was not seen reading its input")
		}
		r.cmd(nil, "scancel", "--signal=KILL", array+"_2")
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			// A task still completing cannot be requeued yet.
			if err := exec.Command("scontrol", "requeue", array+"_2").Run(); err == nil {
				break
			} else if time.Now().After(end) {
				t.Fatalf("scontrol requeue %s_2: %v", array, err)
			}
		}
		r.wait(3 * time.Minute)
		for _, j := range r.completed(array) {
			if want := map[string]int{"2": 1}[j.task]; j.restarts != want {
				t.Errorf("task %s: %d restarts, want %d", j.task, j.restarts, want)
			}
		}
		st := r.show(stitch)
		if len(st) != 1 || st[0].state != "CANCELLED" {
			t.Fatalf("the stitch after a cancelled-and-requeued task: %+v, want CANCELLED (never satisfied)", st)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Fatalf("%s was published by a cancelled stitch (%v)", out, err)
		}
		_, stitch = r.submitDay(nil, args...)
		r.wait(3 * time.Minute)
		r.completed(stitch)
		slurmSame(t, out, ref)
	})
}
