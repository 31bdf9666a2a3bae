package pgstore_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// cutMode is where a cutProxy cuts a connection.
type cutMode int

const (
	// cutAnswer relays the request that ends the transaction (its
	// COMMIT), withholds the server's answer, and closes the connection:
	// the COMMIT ran, and the client never learns it.
	cutAnswer cutMode = iota + 1
	// cutRequest drops the client's next request and closes the
	// connection: the COMMIT never reached the server.
	cutRequest
)

func (m cutMode) String() string {
	if m == cutAnswer {
		return "answer-lost"
	}
	return "request-lost"
}

// cutProxy relays TCP connections to the server, reading the server's
// messages one by one, and cuts a chosen connection (by its backend's
// process id, which it reads from the server's BackendKeyData) at the
// point its mode says.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	pid    uint32 // the backend whose connection is to be cut; 0: none
	mode   cutMode
	cuts   chan uint32
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target, cuts: make(chan uint32, 8), conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// arm makes the proxy cut the connection of backend pid, as mode says.
func (p *cutProxy) arm(pid uint32, mode cutMode) {
	p.mu.Lock()
	p.pid, p.mode = pid, mode
	p.mu.Unlock()
}

// armed reports whether the connection of backend pid is to be cut as
// mode says.
func (p *cutProxy) armed(pid uint32, mode cutMode) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return pid != 0 && p.pid == pid && p.mode == mode
}

// fire disarms the proxy and records the cut.
func (p *cutProxy) fire(pid uint32) {
	p.mu.Lock()
	p.pid = 0
	p.mu.Unlock()
	p.cuts <- pid
}

func (p *cutProxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
}

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.track(client, true)
		p.track(server, true)
		p.wg.Add(2)
		go p.relay(client, server)
	}
}

// relay runs one connection: the client's bytes go to the server as they
// come (in a goroutine of their own), the server's messages to the client
// one by one.
func (p *cutProxy) relay(client, server net.Conn) {
	defer p.wg.Done()
	var pid atomic.Uint32
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			_ = client.Close()
			_ = server.Close()
			p.track(client, false)
			p.track(server, false)
		})
	}
	defer closeBoth()
	go func() {
		defer p.wg.Done()
		defer closeBoth()
		buf := make([]byte, 64<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if id := pid.Load(); p.armed(id, cutRequest) {
					closeBoth()
					p.fire(id)
					return
				}
				if _, err := server.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	r := bufio.NewReader(server)
	var held []byte
	for {
		hdr := make([]byte, 5)
		if _, err := io.ReadFull(r, hdr); err != nil {
			return
		}
		body := make([]byte, int(binary.BigEndian.Uint32(hdr[1:]))-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		if hdr[0] == 'K' && len(body) >= 4 {
			pid.Store(binary.BigEndian.Uint32(body))
		}
		msg := append(hdr, body...)
		if id := pid.Load(); p.armed(id, cutAnswer) {
			// Hold the answer until its ReadyForQuery: in a transaction
			// ('T', 'E'), relay it; idle ('I'), the transaction ended:
			// drop it and cut.
			held = append(held, msg...)
			if hdr[0] != 'Z' {
				continue
			}
			if len(body) == 1 && body[0] == 'I' {
				closeBoth()
				p.fire(id)
				return
			}
			msg, held = held, nil
		}
		if _, err := client.Write(msg); err != nil {
			return
		}
	}
}

// proxiedPool returns a pool of at most n connections to the shared
// cluster through a new cutProxy.
func proxiedPool(t *testing.T, n int32) (*pgxpool.Pool, *cutProxy) {
	cluster, _ := pgtest.Shared(t)
	cfg, err := pgxpool.ParseConfig(cluster.URL)
	require.NoError(t, err)
	if cfg.ConnConfig.TLSConfig != nil || len(cfg.ConnConfig.Host) == 0 || cfg.ConnConfig.Host[0] == '/' {
		t.Skip("the proxy relays plain TCP connections only")
	}
	p := newCutProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	cfg.ConnConfig.Host = "127.0.0.1"
	cfg.ConnConfig.Port = uint16(p.ln.Addr().(*net.TCPAddr).Port)
	cfg.ConnConfig.Fallbacks = nil
	cfg.MaxConns = n
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, p
}

func (p *cutProxy) requireCut(t *testing.T, pid uint32) {
	t.Helper()
	select {
	case got := <-p.cuts:
		require.Equal(t, pid, got)
	case <-time.After(30 * time.Second):
		t.Fatal("the connection was not cut")
	}
}
