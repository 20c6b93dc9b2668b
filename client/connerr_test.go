package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIsConnectionError: the connection's failures and the server's
// connection classes are the connection's; every other answer of the
// database (an argument refused, a serialization failure, a statement
// timeout) is the call's. transient agrees on the connection's and adds the
// transaction's and the server's temporary refusals.
func TestIsConnectionError(t *testing.T) {
	pg := func(code string) error {
		return fmt.Errorf("claim jobs: %w", &pgconn.PgError{Code: code, Message: "m"})
	}
	conn := map[string]error{
		"08006 connection failure": pg("08006"),
		"57P01 admin shutdown":     pg("57P01"),
		"57P03 cannot connect now": pg("57P03"),
		"EOF":                      fmt.Errorf("read: %w", io.EOF),
		"unexpected EOF":           io.ErrUnexpectedEOF,
		"reset":                    &net.OpError{Op: "read", Err: syscall.ECONNRESET},
		"refused":                  syscall.ECONNREFUSED,
		"broken pipe":              syscall.EPIPE,
		"net closed":               net.ErrClosed,
		"deadline":                 context.DeadlineExceeded,
		"closed pool":              errors.New("closed pool"),
		"conn closed":              errors.New("conn closed"),
	}
	for name, err := range conn {
		assert.True(t, IsConnectionError(err), name)
		assert.True(t, IsConnectionError(fmt.Errorf("wrapped: %w", err)), name+", wrapped")
	}
	call := map[string]error{
		"nil":                     nil,
		"22023 invalid argument":  pg("22023"),
		"BK002 stale attempt":     pg("BK002"),
		"42501 privilege":         pg("42501"),
		"40001 serialization":     pg("40001"),
		"57014 statement timeout": pg("57014"),
		"a handler's error":       errors.New("smtp: 550 mailbox unavailable"),
		"cancelled":               context.Canceled,
	}
	for name, err := range call {
		assert.False(t, IsConnectionError(err), name)
	}
	for name, err := range conn {
		if name != "deadline" { // the caller's own deadline ends the Worker's repeats
			assert.True(t, transient(err), "transient: %s", name)
		}
	}
	assert.True(t, transient(pg("40001")), "a serialization failure is transient but not the connection's")
	assert.False(t, transient(pg("22023")))
}

// TestIsConnectionErrorDialing: a real dial to a port nobody listens on is
// the connection's.
func TestIsConnectionErrorDialing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().(*net.TCPAddr)
	require.NoError(t, ln.Close())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = pgx.Connect(ctx, fmt.Sprintf("postgres://u@127.0.0.1:%d/db?sslmode=disable&connect_timeout=2", addr.Port))
	require.Error(t, err)
	assert.True(t, IsConnectionError(err), "%v", err)
}
