package zk

import (
	"context"
	"errors"
	"net"
	"testing"
	"testing/synctest"
	"time"
)

// timedNext calls p.Next and returns how much (fake) time it took.
func timedNext(p *hostProvider) (string, bool, time.Duration) {
	t0 := time.Now()
	s, retry := p.Next()
	return s, retry, time.Since(t0)
}

func TestHostProviderRedialsAtOnceAfterALoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newHostProvider(10*time.Millisecond, time.Second, make(chan struct{}))
		if err := p.Init([]string{"127.0.0.1:1"}); err != nil {
			t.Fatal(err)
		}
		// Connect, lose the connection, connect again: 100 times, no wait at all.
		for i := range 100 {
			s, retry, d := timedNext(p)
			if s != "127.0.0.1:1" || retry || d != 0 {
				t.Fatalf("Next #%d = %q, retryStart %v, after %v; want the server at once, no retryStart", i, s, retry, d)
			}
			p.Connected()
		}
	})
}

func TestHostProviderBacksOffOnConsecutiveFailures(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		servers []string
		want    []time.Duration // wait before each successive Next without Connected
	}{
		{"one server", []string{"a:1"},
			[]time.Duration{0, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 640 * ms, 1000 * ms, 1000 * ms, 1000 * ms}},
		{"three servers", []string{"a:1", "b:1", "c:1"},
			[]time.Duration{0, 0, 0, 10 * ms, 0, 0, 20 * ms, 0, 0, 40 * ms, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newHostProvider(10*ms, time.Second, make(chan struct{}))
				p.jitter = func(d time.Duration) time.Duration { return d }
				if err := p.Init(tc.servers); err != nil {
					t.Fatal(err)
				}
				for i, w := range tc.want {
					s, retry, d := timedNext(p)
					if retry || d != w || s != tc.servers[i%len(tc.servers)] {
						t.Fatalf("Next #%d = %q, retryStart %v, after %v; want %q after %v", i, s, retry, d, tc.servers[i%len(tc.servers)], w)
					}
				}
				// A successful handshake resets the backoff.
				p.Connected()
				if _, _, d := timedNext(p); d != 0 {
					t.Fatalf("first Next after Connected waited %v", d)
				}
			})
		})
	}
}

func TestHostProviderJitterStaysInUpperHalfAndUnderMax(t *testing.T) {
	for _, d := range []time.Duration{1, 2, 3, 10 * time.Millisecond, time.Second} {
		for range 1000 {
			if j := upperHalf(d); j < d/2 || j > d {
				t.Fatalf("upperHalf(%v) = %v, want in [%v, %v]", d, j, d/2, d)
			}
		}
	}
	synctest.Test(t, func(t *testing.T) {
		max := 50 * time.Millisecond
		p := newHostProvider(time.Millisecond, max, make(chan struct{}))
		if err := p.Init([]string{"a:1"}); err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			if _, _, d := timedNext(p); d > max {
				t.Fatalf("Next #%d waited %v, more than the cap %v", i, d, max)
			}
		}
	})
}

func TestHostProviderBackoffDoesNotOverflow(t *testing.T) {
	p := newHostProvider(time.Millisecond, time.Hour, nil)
	for _, k := range []int{0, 10, 62, 63, 64, 1000} {
		if d := p.backoff(k); d <= 0 || d > time.Hour {
			t.Fatalf("backoff(%d) = %v", k, d)
		}
	}
}

func TestHostProviderStopInterruptsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stop := make(chan struct{})
		p := newHostProvider(time.Second, time.Second, stop)
		if err := p.Init([]string{"a:1"}); err != nil {
			t.Fatal(err)
		}
		p.Next() // the first dial fails: the next Next waits a second
		type result struct {
			retry bool
			d     time.Duration
		}
		done := make(chan result, 1)
		go func() {
			_, retry, d := timedNext(p)
			done <- result{retry, d}
		}()
		synctest.Wait() // Next is asleep
		select {
		case r := <-done:
			t.Fatalf("Next returned before stop: %+v", r)
		default:
		}
		close(stop)
		r := <-done
		if !r.retry || r.d != 0 {
			t.Fatalf("Next after stop: retryStart %v after %v; want retryStart at once", r.retry, r.d)
		}
		// Once stopped, Next always reports retryStart without waiting,
		// which makes go-zookeeper's connect loop notice its shutdown.
		if _, retry, d := timedNext(p); !retry || d != 0 {
			t.Fatalf("Next when stopped: retryStart %v after %v", retry, d)
		}
	})
}

func TestHostProviderRefusesNoServers(t *testing.T) {
	if err := newHostProvider(time.Millisecond, time.Second, nil).Init(nil); !errors.Is(err, ErrNoServers) {
		t.Fatalf("Init(nil) = %v, want ErrNoServers", err)
	}
}

func TestDialerStopsAndClosesItsConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stop, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := &dialer{stop: stop, handshake: time.Hour}
	conn, err := d.dial("tcp", ln.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	cancel()
	d.closeConn()
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on the dialled conn after closeConn: %v, want net.ErrClosed", err)
	}
	if _, err := d.dial("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Fatal("dial after stop succeeded")
	}
}
