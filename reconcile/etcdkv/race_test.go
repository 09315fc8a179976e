//go:build race

package etcdkv

func init() { raceBuild = true }
