package redisbloom_test

import (
	"testing"

	"github.com/fpdedup/fpdedup/reconcile"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

func TestMain(m *testing.M) { reconciletest.Main(m, reconcile.QuietRedisLogs) }
