// Package pipes sizes the pipes a process is handed as stdin and stdout.
package pipes

import "os"

// Size is what Widen asks for: Linux's limit for an unprivileged process
// (fs.pipe-max-size, 1 MiB by default).
const Size = 1 << 20

// Widen gives each of files that is a pipe a buffer of Size bytes instead
// of the kernel's default 64 KiB, so that the two ends of a pipeline hand
// each other a megabyte per wakeup instead of 16 pages: fewer wakeups and
// copies for a pipeline reading or writing fpdedup
// (bench/results/ab-2026-12-03-s11.md). Best effort: a lower
// pipe-max-size or another kernel leaves a pipe as it is.
// The cost: a widened pipe counts 256 pages against its user's
// fs.pipe-user-pages-soft (16384 by default, root exempt) while it lives,
// so some 30 pipelines of one user at once, each widening two pipes, use it
// up, and that user's later pipes are created at the kernel's minimum.
func Widen(files ...*os.File) {
	for _, f := range files {
		widen(f)
	}
}
