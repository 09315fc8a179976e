package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/fpstore"
)

// TestResolvePartition: --partition I/N as before, and auto/N, auto from
// each array job scheduler's variables; ambiguous, missing or inconsistent
// variables are usage errors naming them.
func TestResolvePartition(t *testing.T) {
	type env = map[string]string
	r := func(i uint64, bits uint8) fpstore.Range { return fpstore.Range{Bits: bits, Index: i} }
	for _, c := range []struct {
		in        string
		env       env
		want      fpstore.Range
		scheduler string
		err       string // in the error; "" for none
	}{
		{in: "3/8", want: r(3, 3)},
		{in: "0/1", want: r(0, 0)},
		{in: "3/8", env: env{"SLURM_ARRAY_TASK_ID": "5"}, want: r(3, 3)}, // explicit wins, no variable read
		{in: "3/3", err: "power of two"},
		{in: "8/8", err: "0 <= I < N"},
		{in: "x/8", err: "want I/N"},
		{in: "auto/x", env: env{"JOB_COMPLETION_INDEX": "1"}, err: "want I/N"},
		{in: "automatic", err: "want I/N"},

		// Slurm: --array=0-7.
		{in: "auto/8", env: env{"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "7", "SLURM_ARRAY_TASK_COUNT": "8"}, want: r(5, 3), scheduler: "Slurm"},
		{in: "auto", env: env{"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "7", "SLURM_ARRAY_TASK_COUNT": "8"}, want: r(5, 3), scheduler: "Slurm"},
		// --array=1-8: task 1 is range 0.
		{in: "auto", env: env{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "8", "SLURM_ARRAY_TASK_COUNT": "8"}, want: r(0, 3), scheduler: "Slurm"},
		{in: "auto/8", env: env{"SLURM_ARRAY_TASK_ID": "8", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "8", "SLURM_ARRAY_TASK_COUNT": "8"}, want: r(7, 3), scheduler: "Slurm"},
		// --array=10-24:2 (8 tasks).
		{in: "auto", env: env{"SLURM_ARRAY_TASK_ID": "14", "SLURM_ARRAY_TASK_MIN": "10", "SLURM_ARRAY_TASK_MAX": "24", "SLURM_ARRAY_TASK_STEP": "2", "SLURM_ARRAY_TASK_COUNT": "8"}, want: r(2, 3), scheduler: "Slurm"},
		// No COUNT (older Slurm): from MIN, MAX.
		{in: "auto", env: env{"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "3"}, want: r(3, 2), scheduler: "Slurm"},
		// Only the id (set by hand): 0-based, N needed.
		{in: "auto/4", env: env{"SLURM_ARRAY_TASK_ID": "2"}, want: r(2, 2), scheduler: "Slurm"},
		{in: "auto", env: env{"SLURM_ARRAY_TASK_ID": "2"}, err: "SLURM_ARRAY_TASK_COUNT is not set, so the Slurm array's size is not known: give it, --partition auto/N"},
		// --array=1,2,5: not evenly spaced.
		{in: "auto/4", env: env{"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "5", "SLURM_ARRAY_TASK_COUNT": "3"}, err: "not min, min+step"},
		{in: "auto/4", env: env{"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "4", "SLURM_ARRAY_TASK_COUNT": "4"}, err: "not min, min+step"},
		// auto/N against the array's own size.
		{in: "auto/4", env: env{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "7", "SLURM_ARRAY_TASK_COUNT": "8"}, err: "the Slurm array has 8 tasks (SLURM_ARRAY_TASK_COUNT=8, SLURM_ARRAY_TASK_ID=1, SLURM_ARRAY_TASK_MAX=7, SLURM_ARRAY_TASK_MIN=0)"},
		{in: "auto", env: env{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "5", "SLURM_ARRAY_TASK_COUNT": "6"}, err: "6 tasks (SLURM_ARRAY_TASK_COUNT=6, SLURM_ARRAY_TASK_ID=1, SLURM_ARRAY_TASK_MAX=5, SLURM_ARRAY_TASK_MIN=0), not a power of two"},
		{in: "auto", env: env{"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_COUNT": "8"}, err: `SLURM_ARRAY_TASK_ID="x" is not a task number (Slurm)`},

		// Kubernetes Indexed Job: the index only.
		{in: "auto/4", env: env{"JOB_COMPLETION_INDEX": "3"}, want: r(3, 2), scheduler: "Kubernetes Indexed Job"},
		{in: "auto", env: env{"JOB_COMPLETION_INDEX": "3"}, err: "Kubernetes Indexed Job exports no task count (JOB_COMPLETION_INDEX gives the index only): give it, --partition auto/N"},
		{in: "auto/4", env: env{"JOB_COMPLETION_INDEX": "4"}, err: "index 4 (JOB_COMPLETION_INDEX=4), outside 0..3"},
		{in: "auto/4", env: env{"JOB_COMPLETION_INDEX": "-1"}, err: "not a task number"},

		// AWS Batch: the size when set.
		{in: "auto/2", env: env{"AWS_BATCH_JOB_ARRAY_INDEX": "1"}, want: r(1, 1), scheduler: "AWS Batch"},
		{in: "auto", env: env{"AWS_BATCH_JOB_ARRAY_INDEX": "1", "AWS_BATCH_JOB_ARRAY_SIZE": "16"}, want: r(1, 4), scheduler: "AWS Batch"},
		{in: "auto", env: env{"AWS_BATCH_JOB_ARRAY_INDEX": "1"}, err: "AWS_BATCH_JOB_ARRAY_SIZE is not set"},

		// Google Batch.
		{in: "auto", env: env{"BATCH_TASK_INDEX": "0", "BATCH_TASK_COUNT": "1"}, want: r(0, 0), scheduler: "Google Batch"},
		{in: "auto", env: env{"BATCH_TASK_INDEX": "7", "BATCH_TASK_COUNT": "8"}, want: r(7, 3), scheduler: "Google Batch"},
		{in: "auto/8", env: env{"BATCH_TASK_INDEX": "7", "BATCH_TASK_COUNT": "4"}, err: "the Google Batch array has 4 tasks"},

		// None, or two.
		{in: "auto/8", err: "none of SLURM_ARRAY_TASK_ID (Slurm), JOB_COMPLETION_INDEX (Kubernetes Indexed Job), AWS_BATCH_JOB_ARRAY_INDEX (AWS Batch), BATCH_TASK_INDEX (Google Batch) is set"},
		{in: "auto", env: env{"SLURM_ARRAY_TASK_COUNT": "8"}, err: "none of SLURM_ARRAY_TASK_ID"},
		{in: "auto/8", env: env{"SLURM_ARRAY_TASK_ID": "1", "BATCH_TASK_INDEX": "2"}, err: "more than one scheduler's task index is set: SLURM_ARRAY_TASK_ID=1 (Slurm), BATCH_TASK_INDEX=2 (Google Batch)"},
	} {
		p, err := resolvePartition(c.in, func(k string) string { return c.env[k] })
		name := fmt.Sprintf("--partition %s %v", c.in, c.env)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error saying %q", name, err, c.err)
			} else if exitCode(err) != exitError {
				t.Errorf("%s: exit %d", name, exitCode(err))
			}
		case err != nil:
			t.Errorf("%s: %v", name, err)
		case p.Range != c.want || p.Scheduler != c.scheduler:
			t.Errorf("%s: %v from %q, want %v from %q", name, p.Range, p.Scheduler, c.want, c.scheduler)
		case p.Text != c.want.String():
			t.Errorf("%s: text %q", name, p.Text)
		}
	}
}
