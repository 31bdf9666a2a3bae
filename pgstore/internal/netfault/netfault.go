// Package netfault is a TCP proxy on loopback for tests of a slow or
// failing network: it relays every connection it accepts to one target,
// and can add latency each way, partition the network (reset the live
// connections and refuse new ones) or hang it (forward nothing either
// way, then reset the connections when the hang ends).
//
// It listens on 127.0.0.1 only and relays to the target it is given,
// which tests point at a server of their own on loopback.
package netfault

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy relays TCP connections from its loopback address to a target.
// Its methods are safe for concurrent use.
type Proxy struct {
	target string
	addr   string

	mu          sync.Mutex
	cond        *sync.Cond // signalled when the hang ends, and at Close
	ln          net.Listener
	latency     time.Duration // added to each chunk, each way
	partitioned bool
	hung        bool
	closed      bool
	links       map[*link]struct{}

	wg       sync.WaitGroup
	accepted atomic.Int64
	resets   atomic.Int64
}

// link is one relayed connection: the client's side and the target's.
type link struct {
	client, server net.Conn
	once           sync.Once
}

// reset ends both sides of l with a TCP reset (no lingering), so that
// each peer sees its connection reset rather than closed.
func (l *link) reset() {
	l.once.Do(func() {
		for _, c := range []net.Conn{l.client, l.server} {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
		}
	})
}

// Start listens on a free port of 127.0.0.1 and relays what it accepts
// to target (host:port).
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("netfault: listen: %w", err)
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), ln: ln, links: map[*link]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept(ln)
	return p, nil
}

// Addr returns the proxy's address, host:port on 127.0.0.1.
func (p *Proxy) Addr() string { return p.addr }

// Port returns the proxy's port.
func (p *Proxy) Port() uint16 {
	_, port, _ := net.SplitHostPort(p.addr)
	var n uint16
	_, _ = fmt.Sscan(port, &n)
	return n
}

// SetLatency makes every chunk of data wait d before it is forwarded,
// in each direction: a round trip through the proxy takes 2d more. The
// order of the data is kept, and chunks in flight do not wait for each
// other, as on a long link.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// Partition resets every live connection and refuses new ones (the
// listener is closed: a connect is refused by the system) until Heal.
func (p *Proxy) Partition() {
	p.cut(func() bool {
		if p.closed || p.partitioned {
			return false
		}
		p.partitioned = true
		return true
	})
}

// cut closes the listener and resets every live connection, when mark
// (called with p.mu held) says so.
func (p *Proxy) cut(mark func() bool) {
	p.mu.Lock()
	if !mark() {
		p.mu.Unlock()
		return
	}
	ln := p.ln
	p.ln = nil
	links := p.takeLinks()
	p.cond.Broadcast()
	p.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	for _, l := range links {
		l.reset()
	}
}

// Hang stops forwarding data, both ways, on every connection, live or
// new (new connections are accepted and then hang too), until Heal,
// which then resets every connection that lived through the hang.
func (p *Proxy) Hang() {
	p.mu.Lock()
	p.hung = true
	p.mu.Unlock()
}

// Heal ends a partition (the proxy listens again on the same address)
// or a hang (every connection that lived through it is reset, as a
// network that dropped it would leave it).
func (p *Proxy) Heal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("netfault: closed")
	}
	if p.hung {
		p.hung = false
		for _, l := range p.takeLinks() {
			l.reset()
		}
		p.cond.Broadcast()
	}
	if p.partitioned {
		var ln net.Listener
		var err error
		// The port was just released; the system may take a moment
		// before it can be bound again.
		for i := 0; i < 50; i++ {
			if ln, err = net.Listen("tcp", p.addr); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("netfault: listen again on %s: %w", p.addr, err)
		}
		p.partitioned = false
		p.ln = ln
		p.wg.Add(1)
		go p.accept(ln)
	}
	return nil
}

// Stats returns how many connections the proxy accepted and how many it
// reset (by Partition, or at the end of a hang).
func (p *Proxy) Stats() (accepted, resets int64) {
	return p.accepted.Load(), p.resets.Load()
}

// Close stops listening, resets every connection and waits for the
// proxy's goroutines to end.
func (p *Proxy) Close() {
	p.cut(func() bool {
		if p.closed {
			return false
		}
		p.closed, p.hung = true, false
		return true
	})
	p.wg.Wait()
}

// takeLinks removes and returns every live link, counted as reset; p.mu
// is held.
func (p *Proxy) takeLinks() []*link {
	out := make([]*link, 0, len(p.links))
	for l := range p.links {
		out = append(out, l)
		delete(p.links, l)
	}
	p.resets.Add(int64(len(out)))
	return out
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = client.Close()
			continue
		}
		l := &link{client: client, server: server}
		p.mu.Lock()
		if p.closed || p.partitioned {
			p.mu.Unlock()
			l.reset()
			continue
		}
		p.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(4)
		go p.pipe(l, client, server)
		go p.pipe(l, server, client)
	}
}

// chunk is data read from one side, to be written to the other once due.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe relays from src to dst: a reader queues what it reads with the
// time it is due, a writer forwards each chunk once due and while the
// network does not hang. A side that ends (or fails) ends the link once
// what it sent before has been forwarded.
func (p *Proxy) pipe(l *link, src, dst net.Conn) {
	defer p.wg.Done()
	q := make(chan chunk, 256)
	go p.deliver(l, dst, q)
	defer close(q)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			d := p.latency
			p.mu.Unlock()
			q <- chunk{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(d)}
		}
		if err != nil {
			return
		}
	}
}

// deliver writes the chunks of q to dst as they come due, holding them
// while the network hangs; when q ends, or a write fails, or the link is
// reset, it resets the link and drains q, so that its reader never
// blocks.
func (p *Proxy) deliver(l *link, dst net.Conn, q <-chan chunk) {
	defer p.wg.Done()
	defer func() {
		p.forget(l)
		for range q {
		}
	}()
	for c := range q {
		if d := time.Until(c.due); d > 0 {
			time.Sleep(d)
		}
		if !p.wait(l) {
			return
		}
		if _, err := dst.Write(c.data); err != nil {
			return
		}
	}
}

// wait blocks while the network hangs; it reports false once l was
// reset or the proxy closed.
func (p *Proxy) wait(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.hung && !p.closed {
		if _, live := p.links[l]; !live {
			return false
		}
		p.cond.Wait()
	}
	_, live := p.links[l]
	return live && !p.closed
}

// forget drops l from the live links and resets it.
func (p *Proxy) forget(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
	l.reset()
}
