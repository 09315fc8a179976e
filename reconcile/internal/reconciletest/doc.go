// Package reconciletest is what the tests of reconcile's packages share:
// RESP replies to serve. It is imported by tests alone (TestLayering
// checks that no package of the product does), and by no package of
// reconcile but in its tests.
package reconciletest
