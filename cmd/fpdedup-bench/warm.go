package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/internal/hugemem"
	"github.com/fpdedup/fpdedup/internal/units"
)

func newWarmCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "warm [SIZE]",
		Short: "Map, touch and free SIZE of huge pages (default 1GiB), so that the next process finds its memory backed",
		Long: `Warm maps SIZE bytes of anonymous memory as huge pages, writes a byte to
each 2 MiB page and exits, freeing them. It exists for timing on a virtual
machine that hands freed memory back to its host: there, a process that maps
huge pages right after another one freed its own finds them backed (fpdedup
count of 10M lines: 1.1 s, 0.3 s of system time), and after a pause or a
process that used small pages it waits for the host (5 s, 6 s of system
time). Run before each timed run (bench/ab.sh -w), it puts every command,
fpdedup or peer, in the same state: memory the host has just backed.`,
		Example: `  bench/ab.sh -w 'fpdedup-bench warm' 'fpdedup count events.txt' 'sort events.txt | uniq -c'`,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			size := int64(1 << 30)
			if len(args) == 1 {
				var err error
				if size, err = units.ParseSize(args[0]); err != nil || size <= 0 {
					return usageErrorf("SIZE: %q is not a size (e.g. 1GiB)", args[0])
				}
			}
			mem, err := hugemem.Alloc(int(size))
			if err != nil {
				return fmt.Errorf("cannot map %d bytes: %w", size, err)
			}
			defer hugemem.Free(mem)
			for off := 0; off < len(mem); off += 2 << 20 {
				mem[off] = 1
			}
			return nil
		},
	}
}
