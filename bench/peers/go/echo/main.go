// Command echo is the Go server of the lab's `echo` experiment (bench/scenarios.md).
//
// Usage: echo --port P
//
// The server a Go programmer writes: net.Listen, one goroutine per connection, a Read into the
// connection's buffer and a Write of exactly what it got, on GOMAXPROCS=1 (one thread runs Go code;
// the netpoller wakes goroutines). TCP_NODELAY is Go's default for TCP connections and is set anyway.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
)

const chunk = 16384 // bytes one Read may take, as in the C servers

func main() {
	port := flag.Int("port", 0, "TCP port on 127.0.0.1")
	flag.Parse()
	if *port <= 0 || *port > 65535 || flag.NArg() != 0 {
		fail("usage: echo --port P")
	}
	runtime.GOMAXPROCS(1)

	listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fail("%v", err)
	}
	for {
		conn, err := listener.Accept()
		if err != nil {
			fail("accept: %v", err)
		}
		go echo(conn.(*net.TCPConn))
	}
}

// echo sends every chunk it reads straight back, until end of file or an error.
func echo(conn *net.TCPConn) {
	defer conn.Close()
	if err := conn.SetNoDelay(true); err != nil {
		return
	}
	buf := make([]byte, chunk)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			if _, werr := conn.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "echo: "+format+"\n", args...)
	os.Exit(1)
}
