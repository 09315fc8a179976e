package redisconn_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fpdedup/fpdedup/internal/memplan"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/fpdedup/fpdedup/reconcile/redisconn"
)

// command is a RESP command of args, as the Pool's callers write them.
func command(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = redisconn.AppendBulk(b, a)
	}
	return b
}

// TestPipelineInts, against the test Redis: the integers of a pipeline's
// replies come back in order, those of arrays (SMISMEMBER, as BF.MEXISTS
// answers) among them; a negative one too; an error reply is returned
// once every reply was read, and the connection then serves the next
// pipeline in step.
func TestPipelineInts(t *testing.T) {
	ctx := context.Background()
	reconciletest.RedisDB(t, 15)
	c, err := redisconn.Open(ctx, redisconn.Server{Addr: reconciletest.RedisAddr(t), DB: 15}, &online.Config{Target: "the test's redis", Timeout: 5 * time.Second, Conns: 1, Backoff: time.Millisecond,
		Plan: memplan.Reconcile(memplan.ReconcileJob{Mem: 256 << 20})})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Raw == nil {
		t.Fatal("no raw pool for a single server")
	}
	var cmds []byte
	for _, cmd := range [][]string{
		{"SADD", "s", "a", "b", "c"},
		{"SMISMEMBER", "s", "a", "x", "c", "y"},
		{"SET", "k", "v"},
		{"SADD", "s", "a"},
		{"DECRBY", "n", "1234567"},
	} {
		cmds = append(cmds, command(cmd...)...)
	}
	got, err := c.Raw.PipelineInts(ctx, cmds, 5, nil)
	if want := []int64{3, 1, 0, 1, 0, 0, -1234567}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("PipelineInts: %v, %v; want %v", got, err, want)
	}
	cmds = append(append(command("SCARD", "s"), command("INCR", "s")...), command("SCARD", "s")...)
	got, err = c.Raw.PipelineInts(ctx, cmds, 3, nil)
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") || !slices.Equal(got, []int64{3, 3}) {
		t.Fatalf("an error reply among three: %v, %v; want WRONGTYPE after [3 3]", got, err)
	}
	got, err = c.Raw.PipelineInts(ctx, command("SMISMEMBER", "s", "b"), 1, make([]int64, 0, 8))
	if err != nil || !slices.Equal(got, []int64{1}) {
		t.Fatalf("the next pipeline: %v, %v", got, err)
	}
	// Pipeline alone reads the same replies and keeps none.
	if err := c.Raw.Pipeline(ctx, command("SMISMEMBER", "s", "b"), 1); err != nil {
		t.Fatal(err)
	}
}
