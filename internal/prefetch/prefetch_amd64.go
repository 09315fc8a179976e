package prefetch

//go:noescape
func addrs_(addrs []uintptr)

func addr_(a uintptr)
