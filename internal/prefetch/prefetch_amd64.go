package prefetch

//go:noescape
func addrs_(addrs []uintptr)
