package report

// EtcdReport is what reading and writing keys under an etcd prefix found
// beyond the comparison's counts: the revision the audit read at (a
// consistent snapshot, however long it ran), the keys bound to leases,
// and what the compare-and-create transactions and the read back said.
type EtcdReport struct {
	Prefix string `json:"prefix"`
	Hex    int    `json:"hex"` // key width: 64 (whole SHA-256) or 32
	// Revision is the revision the audit read at (the last try's);
	// Compacted lists each earlier one that was compacted before the
	// audit finished, so that it was started again at a new one.
	Revision  int64   `json:"revision"`
	Compacted []int64 `json:"compacted_revisions"`
	Keys      int64   `json:"keys_read"` // under the prefix, bad ones included
	Expected  int64   `json:"keys_counted"`
	// Repeats are 64-hex keys sharing their first 128 bits (the index's
	// fingerprint) with the key before: compared once.
	Repeats int64 `json:"repeats"`
	Pages   int   `json:"pages"`
	Parts   int   `json:"ranges"`
	Retries int   `json:"retries"` // requests sent again after a lost member or a timeout
	// Leased keys are bound to a lease: they vanish when it ends, by
	// design. MinTTL is the shortest remaining time to live of their
	// leases in seconds (-1: none live); Expired those whose lease had
	// ended when asked (still in the revision read).
	Leased  int64 `json:"leased_keys"`
	Leases  int   `json:"leases"`
	Expired int64 `json:"leased_keys_expired"`
	MinTTL  int64 `json:"min_ttl_seconds"`
	// The writes (compare-and-create transactions): keys created, keys
	// found already there and left as they were (Ambiguous of them after
	// an attempt whose outcome was lost: possibly this run's own).
	Value     string `json:"value_template,omitempty"`
	Created   int64  `json:"created"`
	Existed   int64  `json:"existed"`
	Ambiguous int64  `json:"ambiguous"`
	Txns      int64  `json:"transactions"`
	TxnRetry  int64  `json:"transaction_retries"`
	// OtherValue counts keys read back present with another value than
	// this run would write: written by another writer first, and never
	// overwritten (compare-and-create).
	OtherValue        int64    `json:"read_back_other_value"`
	OtherValueSamples []string `json:"read_back_other_value_samples,omitempty"`
}
