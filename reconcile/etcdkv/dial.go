package etcdkv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrAuth: etcd refused the user, the password or the permission to read
// the prefix.
var ErrAuth = errors.New("etcd refused the credentials")

// Options configure a Client. The credentials come from the caller (an
// environment variable, a file): Dial never reads them from anywhere else,
// and no error or String names them.
type Options struct {
	// Endpoints are host:port (or http://, https:// URLs) of members; the
	// client spreads requests over them and fails over when one goes.
	Endpoints []string
	// CAFile verifies the members' certificates; CertFile and KeyFile are
	// the client's certificate. Any of them makes the connection TLS.
	CAFile, CertFile, KeyFile string
	// Username and Password, when Username is set, authenticate.
	Username, Password string
	// Timeout bounds Dial (connecting, authenticating, one read to check)
	// and each attempt of a request; default 10s.
	Timeout time.Duration
	// Prefix: Dial checks the connection by reading one key under it, the
	// permission a scan needs.
	Prefix string
	// MaxRecvBytes is the largest response accepted (default 64 MiB): a
	// page that would be larger is asked again in halves, which is what
	// bounds a scan's memory whatever the keys and values weigh.
	MaxRecvBytes int
	// MaxTxnOps and MaxRequestBytes are the server's --max-txn-ops and
	// --max-request-bytes (defaults 128 and 1.5 MiB, etcd's): Create and
	// Get split batches to stay within them.
	MaxTxnOps       int
	MaxRequestBytes int
	// Retries is how many times a write or a read-back is sent again after
	// a lost connection, a leader change or an attempt's timeout (default
	// 10); compare-and-create makes that safe.
	Retries int
}

// String describes the options without the password.
func (o Options) String() string {
	s := "etcd " + strings.Join(o.Endpoints, ",")
	if o.CAFile != "" || o.CertFile != "" {
		s += " (TLS)"
	}
	if o.Username != "" {
		s += " as " + o.Username
	}
	return s
}

// GoString is String, so %#v never prints the password either.
func (o Options) GoString() string { return o.String() }

func (o *Options) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxRecvBytes <= 0 {
		o.MaxRecvBytes = 64 << 20
	}
	if o.MaxTxnOps <= 0 {
		o.MaxTxnOps = 128
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = 3 << 19
	}
	if o.Retries <= 0 {
		o.Retries = 10
	}
}

// A Client is a connection to one etcd cluster; safe for concurrent use.
type Client struct {
	c *clientv3.Client
	o Options
	// txnKeys is the most keys a transaction holds, MaxTxnOps until the
	// server refuses one as too large (its own --max-txn-ops or
	// --max-request-bytes below the client's): then half as many, for
	// every transaction after.
	txnKeys atomic.Int64
}

// Dial connects to the cluster and checks the connection with one read
// under o.Prefix, all within o.Timeout (and ctx): an endpoint that is down,
// is not etcd or never answers gives a *DialError (ErrUnreachable) naming
// the endpoints, never a hang; refused credentials give ErrAuth.
func Dial(ctx context.Context, o Options) (*Client, error) {
	o.defaults()
	if len(o.Endpoints) == 0 {
		return nil, errors.New("etcd: no endpoint given")
	}
	tc, err := o.tls()
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(o.Timeout)
	// Four fifths of the time to connect and check, the rest to say why not.
	ctx, cancel := context.WithTimeout(ctx, o.Timeout*4/5)
	defer cancel()
	cfg := clientv3.Config{
		Endpoints:          o.Endpoints,
		DialTimeout:        o.Timeout * 4 / 5,
		TLS:                tc,
		Username:           o.Username,
		Password:           o.Password,
		MaxCallRecvMsgSize: o.MaxRecvBytes,
		MaxCallSendMsgSize: max(o.MaxRequestBytes, 2<<20) + 1<<20,
		// A member that stops answering without closing its connections
		// (frozen, its host gone) is noticed within these.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               nopLogger(),
		Context:              context.Background(),
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, o.dialErr(ctx, err, deadline)
	}
	// clientv3.New connects lazily: this read is what proves a member
	// answers (and, with a user, that it may read the prefix).
	probe := o.Prefix
	if probe == "" {
		probe = "\x00" // etcd has no empty key
	}
	if _, err := c.Get(ctx, probe, clientv3.WithLimit(1), clientv3.WithKeysOnly()); err != nil {
		c.Close()
		return nil, o.dialErr(ctx, err, deadline)
	}
	cl := &Client{c: c, o: o}
	cl.txnKeys.Store(int64(o.MaxTxnOps))
	return cl, nil
}

// dialErr classifies a failure to connect. clientv3 waits for a ready
// connection until the deadline, so its error says only that time ran
// out: each endpoint is tried with a plain TCP connection, until deadline,
// to say whether it refused or accepted and then did not answer as etcd.
func (o *Options) dialErr(ctx context.Context, err error, deadline time.Time) error {
	if isAuth(err) {
		return fmt.Errorf("etcd at %s: %w: %v", strings.Join(o.Endpoints, ","), ErrAuth, err)
	}
	if ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (last: %v)", ctx.Err(), err)
	}
	tc, _ := o.tls() // loaded once already
	return &DialError{Endpoints: o.Endpoints, Err: err, Why: diagnose(o.Endpoints, deadline, tc)}
}

// diagnose says of each endpoint whether a TCP connection to it is
// refused or made, and then how a TLS handshake went: with tc (the
// client's TLS), its error (an unknown authority, a client certificate
// the member asks for); without, whether the member serves TLS.
func diagnose(eps []string, deadline time.Time, tc *tls.Config) []string {
	why := make([]string, len(eps))
	done := make(chan struct{})
	for i, ep := range eps {
		go func() {
			defer func() { done <- struct{}{} }()
			addr := ep
			if _, rest, ok := strings.Cut(ep, "://"); ok {
				addr = rest
			}
			d := net.Dialer{Deadline: deadline}
			c, err := d.Dial("tcp", addr)
			if err != nil {
				why[i] = fmt.Sprintf("%s: %v", ep, err)
				return
			}
			defer c.Close()
			why[i] = ep + ": " + handshake(c, addr, deadline, tc)
		}()
	}
	for range eps {
		<-done
	}
	return why
}

// handshake tries TLS on a connection made, and says what it found.
func handshake(c net.Conn, addr string, deadline time.Time, tc *tls.Config) string {
	host, _, _ := net.SplitHostPort(addr)
	cfg := &tls.Config{InsecureSkipVerify: true, ServerName: host} // only to see whether it serves TLS
	if tc != nil {
		cfg = tc.Clone()
		cfg.ServerName = host
	}
	c.SetDeadline(deadline)
	t := tls.Client(c, cfg)
	err := t.Handshake()
	if err == nil && tc != nil {
		// With TLS 1.3 a member that wants a client certificate says so
		// after the handshake, at the first read.
		rd := time.Now().Add(time.Second)
		if deadline.Before(rd) {
			rd = deadline
		}
		t.SetReadDeadline(rd)
		if _, rerr := t.Read(make([]byte, 1)); rerr != nil && !errors.Is(rerr, os.ErrDeadlineExceeded) && !errors.Is(rerr, io.EOF) {
			err = rerr
		}
	}
	switch {
	case tc != nil && err != nil:
		return "accepts connections, but the TLS handshake failed: " + err.Error()
	case tc == nil && err == nil:
		return "serves TLS: give ca= (and cert= and key= if it asks for a client certificate)"
	case tc != nil:
		return "accepts TLS connections but did not answer as etcd (not etcd, or stalled)"
	}
	return "accepts connections but did not answer as etcd (not etcd, or stalled)"
}

func isAuth(err error) bool {
	for _, e := range []error{rpctypes.ErrAuthFailed, rpctypes.ErrPermissionDenied, rpctypes.ErrInvalidAuthToken,
		rpctypes.ErrUserEmpty, rpctypes.ErrAuthNotEnabled} {
		if errors.Is(rpctypes.Error(err), e) {
			return true
		}
	}
	switch grpcCode(err) {
	case codes.Unauthenticated, codes.PermissionDenied:
		return true
	}
	return false
}

// grpcCode is the status code of an error from clientv3, which turns the
// errors etcd names into rpctypes.EtcdError and leaves the others gRPC
// status errors.
func grpcCode(err error) codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(rpctypes.Error(err), &ee) {
		return ee.Code()
	}
	return status.Code(err)
}

// tls loads the certificate files; nil when none is named.
func (o *Options) tls() (*tls.Config, error) {
	if o.CAFile == "" && o.CertFile == "" && o.KeyFile == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, &FileError{What: "CA file", Path: o.CAFile, Err: err}
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, &FileError{What: "CA file", Path: o.CAFile, Err: errors.New("no PEM certificate in it")}
		}
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, errors.New("etcd: a client certificate needs both its file and its key file")
	}
	if o.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, &FileError{What: "client certificate and key files", Path: o.CertFile + ", " + o.KeyFile, Err: err}
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Close releases the connections.
func (c *Client) Close() error { return c.c.Close() }

// Endpoints are the members the client was given.
func (c *Client) Endpoints() []string { return c.o.Endpoints }

// where names the cluster in an error.
func (c *Client) where() string { return "etcd at " + strings.Join(c.o.Endpoints, ",") }

// retryable: the request may not have reached a quorum and may be sent
// again (to another member): a lost connection, no leader or a new one, a
// proposal that timed out, or this attempt's own timeout while the
// caller's context is still alive.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	switch grpcCode(err) {
	case codes.DeadlineExceeded, codes.Unavailable:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// backoff waits before try i (from 1): 50 ms doubling to 1.6 s, or until
// ctx ends.
func backoff(ctx context.Context, i int) error {
	t := time.NewTimer(50 * time.Millisecond << min(i-1, 5))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// nopLogger keeps clientv3 quiet: its warnings would go to the caller's
// stderr in its own format; errors come back as values instead.
func nopLogger() *zap.Logger { return zap.NewNop() }
