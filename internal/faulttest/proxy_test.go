package faulttest

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// proxy is a TCP proxy on loopback in front of PostgreSQL. Clients keep its
// address while the server behind it restarts on another port (target is
// asked on every new connection), and a test can cut a connection right
// after (or instead of) forwarding a chosen query.
type proxy struct {
	ln     net.Listener
	target func() string

	mu    sync.Mutex
	conns map[net.Conn]bool
	// When a client chunk contains trigger: forward it and cut the
	// connection after delay (the server ran it, the reply is lost), or,
	// with before, cut without forwarding (the server never saw it).
	trigger []byte
	before  bool
	delay   time.Duration
	cuts    int
}

func newProxy(target func() string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go p.accept()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) close() {
	p.ln.Close()
	p.closeAll()
}

// closeAll cuts every open connection, as a server restart does.
func (p *proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// arm makes the next client chunk that contains trigger cut its
// connection (once).
func (p *proxy) arm(trigger string, before bool, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trigger, p.before, p.delay = []byte(trigger), before, delay
}

func (p *proxy) cutCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

func (p *proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
}

func (p *proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(client)
	}
}

func (p *proxy) serve(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target(), 5*time.Second)
	if err != nil {
		client.Close()
		return
	}
	p.track(client, true)
	p.track(server, true)
	defer func() {
		client.Close()
		server.Close()
		p.track(client, false)
		p.track(server, false)
	}()
	var mute atomic.Bool // set once a cut is decided: the reply is lost
	go func() {
		defer client.Close()
		b := make([]byte, 64*1024)
		for {
			n, err := server.Read(b)
			if n > 0 && !mute.Load() {
				if _, werr := client.Write(b[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64*1024)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			p.mu.Lock()
			hit := p.trigger != nil && bytes.Contains(chunk, p.trigger)
			before, delay := p.before, p.delay
			if hit {
				p.trigger = nil
				p.cuts++
			}
			p.mu.Unlock()
			if hit {
				mute.Store(true)
				if before {
					return
				}
			}
			if _, werr := server.Write(chunk); werr != nil {
				return
			}
			if hit {
				// Let the server run and commit it, then lose the reply.
				time.Sleep(delay)
				return
			}
		}
		if err != nil {
			return
		}
	}
}
