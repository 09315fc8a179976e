// Package reconciletest is what the tests of reconcile's packages share:
// the fpdedup binary built once a test process and run as a user would
// (Main, Fpdedup), datasets of known truth and online state, the report a
// run writes, the servers of scripts/services (Redis, the Redis Cluster,
// MariaDB: reached, loaded, killed and restarted), proxies that take a
// server away from one client at a chosen point, the L2 bloom's reference
// written from DESIGN's words, and RESP replies to serve.
//
// The servers are shared by every test package, which go test runs side
// by side: a test that asks for one (RedisAddr, ClusterSeeds, MySQLDSN)
// holds them all until it ends, so that tests using servers run one at a
// time whatever their package. Without the servers' environment
// (scripts/services/with-services.sh sets it), those tests skip and say
// so.
//
// Imported by tests alone (TestLayering checks that no package of the
// product does); it imports no package of reconcile's but report, so that
// the tests inside any of them may use it.
package reconciletest
