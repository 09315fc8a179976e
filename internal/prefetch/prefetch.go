// Package prefetch asks the CPU to start loading cache lines that a loop
// will read soon, without waiting for them.
//
// Go has no prefetch intrinsic. A plain load of a line that misses holds
// its instruction in the reorder buffer until the line arrives, so a loop
// of loads keeps only as many misses in flight as the buffer has room for,
// and the work after it waits for all of them. A prefetch instruction
// retires at once: the lines of the next group of probes load while the
// current group is decided.
package prefetch

// Addrs starts loading the cache line of each address. An address need not
// be valid: a prefetch never faults, so a stale address (a table that has
// since grown) costs a wasted line, nothing else. On architectures without
// an assembly version it does nothing.
func Addrs(addrs []uintptr) { addrs_(addrs) }
