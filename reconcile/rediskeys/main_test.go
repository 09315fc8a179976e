package rediskeys_test

import (
	"os"
	"testing"

	"github.com/fpdedup/fpdedup/reconcile"
)

func TestMain(m *testing.M) {
	// The in-process runs' go-redis clients die with the fake servers'
	// connections: quiet, as in the CLI.
	reconcile.QuietRedisLogs()
	os.Exit(m.Run())
}
