package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/fpdedup/fpdedup/fpstore"
)

// --partition (build, merge): I/N, or auto/N and auto, which take I (and
// for auto N) from the array job scheduler the command runs under, so a
// task's command line needs no shell arithmetic on the scheduler's
// variables (docs/SCALE-OUT.md). One parser for every command, through the
// job: the range kept, and where an auto one came from, are in the summary
// and --stats-json.

// arrayScheduler is what an array job scheduler tells each task.
type arrayScheduler struct {
	name  string
	index string // the task's index, 0-based unless min says otherwise
	count string // how many tasks the array has; "" when not exported
	// Slurm only: the array's first and last task ids and their step
	// (--array=1-8, --array=0-14:2), from which the 0-based index and the
	// count follow.
	min, max, step string
}

var arraySchedulers = []arrayScheduler{
	{name: "Slurm", index: "SLURM_ARRAY_TASK_ID", count: "SLURM_ARRAY_TASK_COUNT",
		min: "SLURM_ARRAY_TASK_MIN", max: "SLURM_ARRAY_TASK_MAX", step: "SLURM_ARRAY_TASK_STEP"},
	{name: "Kubernetes Indexed Job", index: "JOB_COMPLETION_INDEX"}, // no count exported: auto/N
	{name: "AWS Batch", index: "AWS_BATCH_JOB_ARRAY_INDEX", count: "AWS_BATCH_JOB_ARRAY_SIZE"},
	{name: "Google Batch", index: "BATCH_TASK_INDEX", count: "BATCH_TASK_COUNT"},
}

// partition is a resolved --partition.
type partition struct {
	Range fpstore.Range `json:"-"`
	Text  string        `json:"range"` // as Range prints it: "3/8", "all"
	Given string        `json:"given"` // as --partition was given
	// Scheduler and Variables: for auto, whose task this is and the
	// variables read (those set), as the scheduler set them.
	Scheduler string            `json:"scheduler,omitempty"`
	Variables map[string]string `json:"variables,omitempty"`
}

// describe is the summary line of an auto partition.
func (p partition) describe() string {
	return fmt.Sprintf("--partition %s is %s: a %s task (%s)", p.Given, p.Text, p.Scheduler, p.vars())
}

// vars lists the scheduler's variables read, sorted: NAME=VALUE, ….
func (p partition) vars() string {
	names := make([]string, 0, len(p.Variables))
	for k := range p.Variables {
		names = append(names, k)
	}
	slices.Sort(names)
	for i, k := range names {
		names[i] = k + "=" + p.Variables[k]
	}
	return strings.Join(names, ", ")
}

// partitionUsage is --partition's help, the same for every command.
const partitionUsage = "keep only prefix range `I/N` (0-based I, N a power of two): one of N machines' share. " +
	"auto/N takes I from the array job task this runs as (SLURM_ARRAY_TASK_ID less SLURM_ARRAY_TASK_MIN, Kubernetes JOB_COMPLETION_INDEX, " +
	"AWS_BATCH_JOB_ARRAY_INDEX, Google BATCH_TASK_INDEX); auto takes N too, where the scheduler exports it " +
	"(SLURM_ARRAY_TASK_COUNT, AWS_BATCH_JOB_ARRAY_SIZE, BATCH_TASK_COUNT); the summary and --stats-json say which"

const partitionWant = "want I/N with N a power of two and 0 <= I < N, or auto/N or auto (I, and N, from an array job scheduler's variables)"

// resolvePartition reads --partition s: I/N (0-based I, N a power of two),
// auto/N (I from the scheduler the environment names), or auto (N too, from
// a scheduler that exports its array's size).
func resolvePartition(s string, getenv func(string) string) (partition, error) {
	p := partition{Given: s}
	is, ns, slash := strings.Cut(s, "/")
	var n uint64
	if slash {
		var err error
		if n, err = strconv.ParseUint(ns, 10, 64); err != nil {
			return p, usageErrorf("--partition %q: %s", s, partitionWant)
		}
	}
	var i uint64
	if is == "auto" {
		var count uint64
		var err error
		if i, count, err = p.fromScheduler(getenv); err != nil {
			return p, err
		}
		switch {
		case !slash && count == 0:
			a := schedulerOf(p.Scheduler)
			if a.count == "" {
				return p, usageErrorf("--partition auto: %s exports no task count (%s gives the index only): give it, --partition auto/N", a.name, a.index)
			}
			return p, usageErrorf("--partition auto: %s is not set, so the %s array's size is not known: give it, --partition auto/N", a.count, a.name)
		case !slash:
			n = count
		case count != 0 && count != n:
			return p, usageErrorf("--partition %s, but the %s array has %d tasks (%s): each of N tasks keeps one of N ranges; give --partition auto/%d or run %d tasks",
				s, p.Scheduler, count, p.vars(), count, n)
		}
		if n == 0 || n&(n-1) != 0 || n > 1<<32 {
			return p, usageErrorf("--partition %s: the %s array has %d tasks (%s), not a power of two: run 2^b tasks", s, p.Scheduler, n, p.vars())
		}
		if i >= n {
			return p, usageErrorf("--partition %s: this %s task is index %d (%s), outside 0..%d", s, p.Scheduler, i, p.vars(), n-1)
		}
	} else {
		var err error
		i, err = strconv.ParseUint(is, 10, 64)
		if !slash || err != nil || n == 0 || n&(n-1) != 0 || i >= n || n > 1<<32 {
			return p, usageErrorf("--partition %q: %s", s, partitionWant)
		}
	}
	bits := uint8(0)
	for 1<<bits < n {
		bits++
	}
	p.Range = fpstore.Range{Bits: bits, Index: i}
	p.Text = p.Range.String()
	return p, nil
}

// fromScheduler finds the one scheduler whose task index is set and
// reads the task's 0-based index and the array's size (0: not exported).
func (p *partition) fromScheduler(getenv func(string) string) (i, count uint64, err error) {
	var found []arrayScheduler
	var all []string
	for _, a := range arraySchedulers {
		all = append(all, a.index+" ("+a.name+")")
		if getenv(a.index) != "" {
			found = append(found, a)
		}
	}
	switch len(found) {
	case 0:
		return 0, 0, usageErrorf("--partition %s: no array job task index in the environment: none of %s is set; give --partition I/N",
			p.Given, strings.Join(all, ", "))
	case 1:
	default:
		var set []string
		for _, a := range found {
			set = append(set, a.index+"="+getenv(a.index)+" ("+a.name+")")
		}
		return 0, 0, usageErrorf("--partition %s: more than one scheduler's task index is set: %s; unset the one that is not this task's, or give --partition I/N",
			p.Given, strings.Join(set, ", "))
	}
	a := found[0]
	p.Scheduler = a.name
	p.Variables = map[string]string{}
	num := func(name string) (v uint64, set bool, err error) {
		s := getenv(name)
		if name == "" || s == "" {
			return 0, false, nil
		}
		p.Variables[name] = s
		v, perr := strconv.ParseUint(s, 10, 64)
		if perr != nil {
			return 0, true, usageErrorf("--partition %s: %s=%q is not a task number (%s)", p.Given, name, s, a.name)
		}
		return v, true, nil
	}
	id, _, err := num(a.index)
	if err != nil {
		return 0, 0, err
	}
	count, _, err = num(a.count)
	if err != nil {
		return 0, 0, err
	}
	first, hasMin, err := num(a.min)
	if err != nil {
		return 0, 0, err
	}
	last, hasMax, err := num(a.max)
	if err != nil {
		return 0, 0, err
	}
	step, hasStep, err := num(a.step)
	if err != nil {
		return 0, 0, err
	}
	if !hasStep || step == 0 {
		step = 1
	}
	if !hasMin {
		return id, count, nil
	}
	// A Slurm array need not start at 0 (--array=1-8) nor be contiguous
	// (--array=0-14:2): task k is id min+k·step. One whose ids are not
	// evenly spaced (--array=1,2,5) has no such k for every task.
	span := count
	if hasMax && last >= first {
		span = (last-first)/step + 1
	}
	if count == 0 {
		count = span
	}
	if id < first || (id-first)%step != 0 || span != count {
		return 0, 0, usageErrorf("--partition %s: the %s array's task ids are not min, min+step, … (%s): submit it as --array=0-(N-1), or give --partition I/N",
			p.Given, a.name, p.vars())
	}
	return (id - first) / step, count, nil
}

func schedulerOf(name string) arrayScheduler {
	for _, a := range arraySchedulers {
		if a.name == name {
			return a
		}
	}
	return arrayScheduler{}
}

// partition resolves --partition for the job (as resolvePartition, from
// the process's environment): the range the command keeps. The job's
// --stats-json records it; an auto one's summary says which task of which
// scheduler it is.
func (j *job) partition(s string) (fpstore.Range, error) {
	if s == "" {
		return fpstore.Range{}, nil
	}
	p, err := resolvePartition(s, os.Getenv)
	if err != nil {
		return fpstore.Range{}, err
	}
	j.part = &p
	if p.Scheduler != "" {
		j.summary("%s: %s", j.cmd.Name(), p.describe())
	}
	return p.Range, nil
}
