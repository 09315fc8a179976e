package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/bench"
)

// newRedisBloomBareCommand is the bare module commands the redisbloom
// jobs measure fpdedup reconcile against, on the filters rbbench:{0} …
// rbbench:{N-1} of database 0 that the jobs load.
func newRedisBloomBareCommand(e *env) *cobra.Command {
	var addr, keys, dumps string
	var shards int
	cmd := &cobra.Command{
		Use:   "redisbloom-bare scandump|loadchunk|mexists --addr H:P --shards N",
		Short: "The bare RedisBloom commands of the redisbloom jobs",
		Long: `redisbloom-bare runs what the redisbloom jobs measure fpdedup against, with
nothing of fpdedup's: scandump reads every filter with a BF.SCANDUMP loop,
one chunk a command, into /dev/null (the audit's floor); loadchunk writes the
chunks of --dumps (kept by the job from the filters rebuilt) with pipelined
BF.LOADCHUNK into KEY:bare, deleting it after (the rebuild's floor); mexists
asks every key of --keys in its mod-md5 shard with BF.MEXISTS, 1000 keys a
command and 64 commands a pipeline, and prints how many are not held.`,
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			switch args[0] {
			case "scandump":
				n, err := bench.BareScandump(ctx, addr, shards, io.Discard)
				e.summary("scandump: %d bytes", n)
				return err
			case "loadchunk":
				n, err := bench.BareLoadchunk(ctx, addr, dumps)
				e.summary("loadchunk: %d bytes", n)
				return err
			case "mexists":
				n, err := bench.MExistsAll(ctx, addr, shards, keys)
				if err == nil {
					_, err = fmt.Fprintln(e.stdout, n)
				}
				return err
			}
			return usageErrorf("redisbloom-bare: scandump, loadchunk or mexists, not %q", args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "", "the server")
	f.IntVar(&shards, "shards", bench.DefaultRBShards, "filters")
	f.StringVar(&keys, "keys", "", "mexists: the keys, one a line")
	f.StringVar(&dumps, "dumps", "", "loadchunk: the chunks the job kept")
	return cmd
}
