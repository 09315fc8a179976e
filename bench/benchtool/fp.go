package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
)

// fpMain writes random 128-bit fingerprints as 32 lowercase hex digits a
// line, the input of fpdedup build --format fp: the fast way to make a big
// index without hashing records. Fingerprint i of a seed is a pure function
// of (seed, i), so two ranges of the same seed overlap exactly where their
// indexes do: --from 0 --count 10 and --from 8 --count 10 share 2.
func fpMain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Uint64("seed", 1, "seed: same seed and index, same fingerprint")
	from := countFlag(0)
	fs.Var(&from, "from", "index of the first fingerprint (k/M/G suffixes)")
	count := countFlag(1_000_000)
	fs.Var(&count, "count", "fingerprints to write (k/M/G suffixes)")
	out := fs.String("o", "-", "output file, - for stdout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("fp: unexpected argument %q", fs.Arg(0))
	}
	if int64(from) > (1<<62)-int64(count) {
		return errors.New("fp: --from + --count overflows")
	}
	w, commit, err := create(*out, stdout)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	err = writeFingerprints(bw, *seed, uint64(from), uint64(count))
	if err == nil {
		err = bw.Flush()
	}
	return commit(err)
}

// splitmix64's finaliser: a bijection of uint64 with good avalanche.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// fingerprint i of a seed, as its high and low halves. Distinct (seed, i)
// give distinct (hi, lo): lo alone is a bijection of the stream position.
func fingerprint(seed, i uint64) (hi, lo uint64) {
	base := mix64(seed+0x9e3779b97f4a7c15) * 2
	return mix64(base + 2*i + 1), mix64(base + 2*i)
}

func writeFingerprints(w *bufio.Writer, seed, from, count uint64) error {
	const digits = "0123456789abcdef"
	var line [33]byte
	line[32] = '\n'
	for i := from; i < from+count; i++ {
		hi, lo := fingerprint(seed, i)
		for k := 15; k >= 0; k-- {
			line[k] = digits[hi&15]
			hi >>= 4
		}
		for k := 31; k >= 16; k-- {
			line[k] = digits[lo&15]
			lo >>= 4
		}
		if _, err := w.Write(line[:]); err != nil {
			return err
		}
	}
	return nil
}
