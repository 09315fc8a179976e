package reconcile_test

// End-to-end tests of `fpdedup reconcile` against real servers, never
// mocks: they run the built binary (reconciletest.Main) as a user would.
// Redis and MariaDB come from the environment, which
// scripts/services/with-services.sh sets after starting them:
//
//	bash scripts/services/with-services.sh go test -count=1 ./reconcile/...
//
// Without it, the tests that need a server skip and say so. The tests of
// a store alone are its package's (rediskeys, bitmapbloom, mysqltable,
// exportfile); these are the run's: several stores, interruptions,
// records, usage.

import (
	"testing"

	"github.com/fpdedup/fpdedup/reconcile"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

func TestMain(m *testing.M) { reconciletest.Main(m, reconcile.QuietRedisLogs) }
