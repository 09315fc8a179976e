package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/bench"
)

// newEtcdBareCommand is the bare client loop the etcd-apply job measures
// fpdedup reconcile --apply against.
func newEtcdBareCommand(e *env) *cobra.Command {
	var endpoints, prefix, records string
	var conns, txn int
	cmd := &cobra.Command{
		Use:   "etcd-bare create --endpoints H:P --prefix P --records FILE",
		Short: "The bare etcd client loop of the etcd-apply job",
		Long: `etcd-bare create runs what the etcd-apply job measures fpdedup reconcile
--apply against, with nothing of fpdedup's: --conns goroutines of one
go.etcd.io/etcd/client/v3 client, each sending transactions
If(CreateRevision(k) == 0 …) Then(Put(k, "") …) of --txn keys, the keys
--prefix and the SHA-256 in hex of each line of --records, the same
transactions reconcile --apply sends. It prints how many keys it created; a
transaction whose keys were not all missing is an error.`,
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "create" {
				return usageErrorf("etcd-bare: create, not %q", args[0])
			}
			if endpoints == "" || prefix == "" || records == "" || conns < 1 || txn < 1 {
				return usageErrorf("etcd-bare create: --endpoints, --prefix and --records are required, --conns and --txn at least 1")
			}
			n, err := bench.EtcdBareCreate(cmd.Context(), strings.Split(endpoints, ","), prefix, records, conns, txn)
			if err == nil {
				_, err = fmt.Fprintln(e.stdout, n)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&endpoints, "endpoints", "", "the members, comma-separated")
	f.StringVar(&prefix, "prefix", "", "the keys' prefix")
	f.StringVar(&records, "records", "", "the records, one a line")
	f.IntVar(&conns, "conns", bench.EtcdConns, "goroutines sending at once")
	f.IntVar(&txn, "txn", bench.EtcdTxn, "keys a transaction")
	return cmd
}
